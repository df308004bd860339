package official

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Percentile is the p-th percentile (0-100) of xs by the nearest-rank
// method: the smallest sample with at least p% of the samples at or below
// it. NaN for no samples.
func Percentile(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	rank := int(math.Ceil(p / 100 * float64(len(s))))
	return s[min(max(rank, 1), len(s))-1]
}

// Median is the middle sample, or the mean of the two middle ones. NaN for
// no samples.
func Median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// Seconds turns durations into seconds for the statistics.
func Seconds(ds []time.Duration) []float64 {
	out := make([]float64, len(ds))
	for i, d := range ds {
		out[i] = d.Seconds()
	}
	return out
}

// Line is one row of the performance table: one quantity measured for
// both operators. Lower is better unless HigherIsBetter.
type Line struct {
	What, Unit          string
	Official, Tailplane float64
	// Samples is how many measurements each median is made of (1 for a
	// single reading).
	Samples        int
	HigherIsBetter bool
	// Missing says why the line has no numbers (then they are ignored).
	Missing string
}

// Ratio is Tailplane's value over the official one.
func (l Line) Ratio() float64 { return l.Tailplane / l.Official }

// Meets says whether Tailplane meets the target on this line: at
// most the official's time and memory (at least its throughput).
func (l Line) Meets() bool {
	if l.HigherIsBetter {
		return l.Tailplane >= l.Official
	}
	return l.Tailplane <= l.Official
}

// PerformanceTable renders lines as a Markdown table: each value, the
// ratio and whether the target is met; missing lines say why.
func PerformanceTable(lines []Line) string {
	var b strings.Builder
	b.WriteString("| measurement | n | official v1.102.5 | Tailplane | Tailplane / official | target met |\n")
	b.WriteString("|---|---:|---:|---:|---:|---|\n")
	for _, l := range lines {
		if l.Missing != "" {
			fmt.Fprintf(&b, "| %s | | not measured | not measured | | %s |\n", l.What, l.Missing)
			continue
		}
		met := "yes"
		if !l.Meets() {
			met = "**no**"
		}
		fmt.Fprintf(&b, "| %s | %d | %s %s | %s %s | %.2fx | %s |\n",
			l.What, l.Samples, formatNumber(l.Official), l.Unit, formatNumber(l.Tailplane), l.Unit, l.Ratio(), met)
	}
	return b.String()
}

// formatNumber prints three significant digits at most, and no exponent.
func formatNumber(x float64) string {
	switch a := math.Abs(x); {
	case a >= 100:
		return fmt.Sprintf("%.0f", x)
	case a >= 10:
		return fmt.Sprintf("%.1f", x)
	default:
		return fmt.Sprintf("%.2f", x)
	}
}

// loadRuns is how many of each side's last runs measure the L7 load: one
// reading of a few seconds on a shared machine is noise (session 11 had one
// per side), the median of three is a measurement.
const loadRuns = 3

// LoadSummary is the median of several loads of one proxy.
type LoadSummary struct {
	PerSecond, P99ms   float64
	Requests, Failures int
	// Conns lists the connections each load opened, e.g. "8, 8, 8".
	Conns string
}

// SummarizeLoads takes the medians of loads' requests/s and p99, and sums
// their requests and failures.
func SummarizeLoads(loads []LoadResult) LoadSummary {
	var sum LoadSummary
	var rates, p99s []float64
	var conns []string
	for _, l := range loads {
		rates = append(rates, l.PerSecond)
		p99s = append(p99s, float64(l.P99.Microseconds())/1000)
		sum.Requests += l.Requests
		sum.Failures += l.Failures
		conns = append(conns, strconv.FormatInt(l.Conns, 10))
	}
	sum.PerSecond, sum.P99ms = Median(rates), Median(p99s)
	sum.Conns = strings.Join(conns, ", ")
	return sum
}
