package node

import (
	"net/netip"
	"testing"
)

func TestIPAM(t *testing.T) {
	a := newIPAM(netip.MustParsePrefix("198.18.7.0/30"))
	ip1, err := a.claim("pod-1", "")
	if err != nil || ip1 != "198.18.7.2" {
		t.Fatalf("first claim = %q, %v", ip1, err)
	}
	if again, _ := a.claim("pod-1", ""); again != ip1 {
		t.Errorf("a pod keeps its IP: got %q", again)
	}
	ip2, err := a.claim("pod-2", "")
	if err != nil || ip2 != "198.18.7.3" {
		t.Fatalf("second claim = %q, %v", ip2, err)
	}
	if _, err := a.claim("pod-3", ""); err == nil {
		t.Errorf("a full subnet must refuse")
	}
	a.release("pod-1")
	if ip, err := a.claim("pod-3", "198.18.7.2"); err != nil || ip != "198.18.7.2" {
		t.Errorf("a resumed pod gets its wanted free IP: %q, %v", ip, err)
	}
}
