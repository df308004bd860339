package realnode

import (
	"net/netip"
	"testing"

	"github.com/tailplane/tailplane/kind-e2e/internal/pki"
)

// The kubelet admits no more pods than host-local can give addresses to,
// and enough for bench/official's 100 proxy pods per operator with the
// system pods and the other side's terminating ones.
func TestMaxPodsFitsThePodAddressRange(t *testing.T) {
	cfg := kubeletConfig(t.TempDir(), kubeletPorts{}, pki.Pair{}, "", "")
	got, _ := cfg["maxPods"].(int)
	prefix := netip.MustParsePrefix(PodCIDR)
	end := netip.MustParseAddr(podRangeEnd)
	// host-local hands out from the address after the gateway (NodeIP) up
	// to podRangeEnd.
	addresses := int(end.As4()[3]) - int(netip.MustParseAddr(NodeIP).As4()[3])
	if !prefix.Contains(end) || got > addresses || got < 200 {
		t.Fatalf("maxPods %d: want at least 200 (100 proxies per side, both sides at a turnover) and at most the %d pod addresses", got, addresses)
	}
}
