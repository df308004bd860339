package official

import (
	"math"
	"strings"
	"testing"
	"time"
)

func TestMedianAndPercentile(t *testing.T) {
	odd := []float64{5, 1, 3}
	even := []float64{4, 1, 3, 2}
	if got := Median(odd); got != 3 {
		t.Errorf("Median(%v) = %v, want 3", odd, got)
	}
	if got := Median(even); got != 2.5 {
		t.Errorf("Median(%v) = %v, want 2.5", even, got)
	}
	if odd[0] != 5 {
		t.Error("Median sorted its argument in place")
	}
	hundred := make([]float64, 100)
	for i := range hundred {
		hundred[i] = float64(100 - i) // 100..1
	}
	for _, tc := range []struct{ p, want float64 }{{50, 50}, {99, 99}, {100, 100}, {0, 1}, {1, 1}} {
		if got := Percentile(hundred, tc.p); got != tc.want {
			t.Errorf("Percentile(1..100, %v) = %v, want %v", tc.p, got, tc.want)
		}
	}
	if !math.IsNaN(Median(nil)) || !math.IsNaN(Percentile(nil, 99)) {
		t.Error("no samples should give NaN")
	}
	if got := Seconds([]time.Duration{1500 * time.Millisecond}); got[0] != 1.5 {
		t.Errorf("Seconds = %v", got)
	}
}

// The table shows each value with the ratio, says where Tailplane misses
// the target (lower is better, or higher for throughput) and why a line has
// no numbers.
func TestPerformanceTable(t *testing.T) {
	table := PerformanceTable([]Line{
		{What: "Ingress apply to first HTTPS 200", Unit: "s", Official: 8, Tailplane: 2, Samples: 20},
		{What: "operator RSS, idle", Unit: "MiB", Official: 40, Tailplane: 60, Samples: 1},
		{What: "L7 requests/s", Unit: "req/s", Official: 1000, Tailplane: 1500, Samples: 1, HigherIsBetter: true},
		{What: "Service apply to first connection", Missing: "L3 proxies need a shell in the image"},
	})
	for _, want := range []string{
		"| Ingress apply to first HTTPS 200 | 20 | 8.00 s | 2.00 s | 0.25x | yes |",
		"| operator RSS, idle | 1 | 40.0 MiB | 60.0 MiB | 1.50x | **no** |",
		"| L7 requests/s | 1 | 1000 req/s | 1500 req/s | 1.50x | yes |",
		"| Service apply to first connection | | not measured | not measured | | L3 proxies need a shell in the image |",
	} {
		if !strings.Contains(table, want) {
			t.Errorf("table lacks %q:\n%s", want, table)
		}
	}
}

// The L7 line is the median of each side's last loads, with every load's
// connection count shown so that a proxy that closes keep-alive
// connections stands out.
func TestSummarizeLoads(t *testing.T) {
	got := SummarizeLoads([]LoadResult{
		{Requests: 3000, PerSecond: 300, P99: 50 * time.Millisecond, Conns: 8},
		{Requests: 6000, PerSecond: 600, P99: 40 * time.Millisecond, Conns: 8, Failures: 1},
		{Requests: 5000, PerSecond: 500, P99: 45 * time.Millisecond, Conns: 3000},
	})
	want := LoadSummary{PerSecond: 500, P99ms: 45, Requests: 14000, Failures: 1, Conns: "8, 8, 3000"}
	if got != want {
		t.Fatalf("SummarizeLoads = %+v, want %+v", got, want)
	}
}
