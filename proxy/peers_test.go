package proxy

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	"tailscale.com/ipn/ipnstate"
	"tailscale.com/types/key"
)

// peerLog is a PeerMemory that keeps every write.
type peerLog struct {
	mu     sync.Mutex
	start  []string
	writes [][]string
	// frozen drops writes (a process killed before its last record).
	frozen bool
}

func (p *peerLog) RecentPeers() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.writes) > 0 {
		return p.writes[len(p.writes)-1]
	}
	return p.start
}

func (p *peerLog) SetRecentPeers(_ context.Context, peers []string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.frozen {
		p.writes = append(p.writes, peers)
	}
	return nil
}

func (p *peerLog) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.writes)
}

// peerStatus is a node status whose peers had their last handshakes
// the given time before now (zero: never).
func peerStatus(now time.Time, handshakes map[string]time.Duration, active ...string) *ipnstate.Status {
	st := &ipnstate.Status{Peer: map[key.NodePublic]*ipnstate.PeerStatus{}}
	for addr, ago := range handshakes {
		ps := &ipnstate.PeerStatus{TailscaleIPs: []netip.Addr{netip.MustParseAddr("fd7a:115c:a1e0::" + addr[len("100.64.0."):]), netip.MustParseAddr(addr)},
			Active: slices.Contains(active, addr)}
		if ago > 0 {
			ps.LastHandshake = now.Add(-ago)
		}
		st.Peer[key.NewNode().Public()] = ps
	}
	return st
}

// The recent peers are those with a handshake within the window or an
// active session, by IPv4 address, sorted, the latest maxRecentPeers.
func TestRecentPeersSelection(t *testing.T) {
	now := time.Now()
	st := peerStatus(now, map[string]time.Duration{
		"100.64.0.9": time.Second, "100.64.0.2": 4 * time.Minute, "100.64.0.3": 6 * time.Minute,
		"100.64.0.4": 0, "100.64.0.5": 0,
	}, "100.64.0.5")
	if got, want := recentPeers(st, now), []string{"100.64.0.2", "100.64.0.5", "100.64.0.9"}; !slices.Equal(got, want) {
		t.Fatalf("recentPeers = %v, want %v", got, want)
	}
	many := map[string]time.Duration{}
	for i := range maxRecentPeers + 10 {
		many[fmt.Sprintf("100.64.0.%d", i+1)] = time.Duration(i+1) * time.Second
	}
	got := recentPeers(peerStatus(now, many), now)
	if len(got) != maxRecentPeers || slices.Contains(got, fmt.Sprintf("100.64.0.%d", maxRecentPeers+1)) || !slices.Contains(got, "100.64.0.1") {
		t.Fatalf("recentPeers of %d peers kept %d: %v; want the %d latest", len(many), len(got), got, maxRecentPeers)
	}
}

// recordPeers writes the list the first time and then only when the set
// of recent peers changed.
func TestRecordPeersOnlyOnChange(t *testing.T) {
	mem := &peerLog{}
	e := &Engine{opts: Options{Peers: mem}}
	now := time.Now()
	handshakes := map[string]time.Duration{"100.64.0.2": time.Second}
	status := func(context.Context) (*ipnstate.Status, error) { return peerStatus(now, handshakes), nil }
	record := func() {
		t.Helper()
		if err := e.recordPeers(context.Background(), status); err != nil {
			t.Fatal(err)
		}
	}
	record()
	record()
	if n := mem.count(); n != 1 {
		t.Fatalf("%d writes for an unchanged set, want 1", n)
	}
	handshakes["100.64.0.2"] = 2 * time.Second // a newer handshake: same set
	record()
	handshakes["100.64.0.7"] = time.Second
	record()
	delete(handshakes, "100.64.0.2")
	record()
	if got, want := mem.writes, [][]string{{"100.64.0.2"}, {"100.64.0.2", "100.64.0.7"}, {"100.64.0.7"}}; !slices.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("writes %v, want %v", got, want)
	}
}
