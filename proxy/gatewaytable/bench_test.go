package gatewaytable

import (
	"fmt"
	"math"
	"net/http/httptest"
	"testing"

	"github.com/tailplane/tailplane/proxy/config"
)

// hostTable is a table of n Exact entries on one host, /svc/0 ... /svc/n-1.
func hostTable(n int) *Table {
	routes := make([]config.HTTPRoute, n)
	for i := range routes {
		routes[i] = entry1(fmt.Sprintf("ns/r/%d", i), []string{"app.example.com"},
			config.HTTPMatch{PathType: config.MatchExact, Path: fmt.Sprintf("/svc/%d", i)})
	}
	return New(80, []config.Listener{{Port: 80, Protocol: config.ListenerHTTP, HTTPRoutes: routes}})
}

// benchMatch matches the host's last entry, the worst case of a scan in
// config order (the path index makes it as cheap as the first).
func benchMatch(b *testing.B, n int) {
	tab := hostTable(n)
	r := httptest.NewRequest("GET", fmt.Sprintf("http://app.example.com/svc/%d", n-1), nil)
	b.ReportAllocs()
	for b.Loop() {
		if tab.MatchRequest(r) == nil {
			b.Fatal("no match")
		}
	}
}

// BenchmarkMatch10 and BenchmarkMatch1000 compare the match latency of 10
// and 1,000 entries on one host (docs/performance.md has the ratio).
func BenchmarkMatch10(b *testing.B)   { benchMatch(b, 10) }
func BenchmarkMatch1000(b *testing.B) { benchMatch(b, 1000) }

// BenchmarkMatch1000Headers is the case the path index cannot narrow:
// 1,000 entries on one host and path "/" told apart by a header, the
// request fitting the last; the table tries them all, in order.
func BenchmarkMatch1000Headers(b *testing.B) {
	routes := make([]config.HTTPRoute, 1000)
	for i := range routes {
		routes[i] = entry1(fmt.Sprintf("ns/r/%d", i), []string{"app.example.com"},
			config.HTTPMatch{Headers: []config.ValueMatch{{Name: "x-tenant", Value: fmt.Sprint(i)}}})
	}
	tab := New(80, []config.Listener{{Port: 80, Protocol: config.ListenerHTTP, HTTPRoutes: routes}})
	r := httptest.NewRequest("GET", "http://app.example.com/", nil)
	r.Header.Set("X-Tenant", "999")
	b.ReportAllocs()
	for b.Loop() {
		if tab.MatchRequest(r) == nil {
			b.Fatal("no match")
		}
	}
}

// BenchmarkSplitPick is one weighted pick among three backends.
func BenchmarkSplitPick(b *testing.B) {
	s := NewSplit([]config.WeightedBackend{be("a", 80), be("b", 15), be("c", 5)})
	b.ReportAllocs()
	for b.Loop() {
		s.Pick()
	}
}

// A 90/10 split over 10,000 requests lands within 1.5 percentage points of
// 90/10 (the standard deviation is 0.3 points, so this fails only if the
// split is wrong).
func TestSplitAccuracy(t *testing.T) {
	s := NewSplit([]config.WeightedBackend{be("stable", 90), be("canary", 10), be("off", 0)})
	const n = 10000
	counts := map[string]int{}
	for range n {
		b, ok := s.Pick()
		if !ok {
			t.Fatal("no backend picked")
		}
		counts[b.Service]++
	}
	share := 100 * float64(counts["canary"]) / n
	t.Logf("canary share over %d requests: %.2f%% (want 10%%)", n, share)
	if math.Abs(share-10) > 1.5 || counts["off"] != 0 || counts["stable"]+counts["canary"] != n {
		t.Errorf("split %v: canary %.2f%%, want 10 ± 1.5 and nothing to the weight-zero backend", counts, share)
	}
}
