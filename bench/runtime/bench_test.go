package benchruntime

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"k8s.io/client-go/dynamic"
)

// Sizes of the comparison; BENCH_ROUNDS overrides the number of interleaved
// throughput rounds (the median is reported).
const (
	burstSize   = 2000
	watchedSize = 10000
	workers     = 4
	fallback    = 3
)

// sizes returns the burst, the number watched and the rounds: with -short
// (CI's check that the benchmark still builds and runs) a small run whose
// figures mean nothing.
func sizes() (burst, watched, rounds int) {
	if testing.Short() {
		return 50, 200, 1
	}
	rounds = fallback
	if v, err := strconv.Atoi(os.Getenv("BENCH_ROUNDS")); err == nil && v > 0 {
		rounds = v
	}
	return burstSize, watchedSize, rounds
}

type side struct {
	name, bin string
	args      []string
	rates     []float64
	rss       float64
}

// BenchmarkOperators runs Tailplane's runtime (twice: success Events off,
// as tailplane-operator runs it, and posted, the runtime's default) and a
// controller-runtime reconciler against the same real API server: throughput on a burst of
// 2,000 new Widgets (each handler adds one annotation; rounds interleaved,
// median reported), then peak RSS of each process while 10,000 Widgets are
// watched and handled. Run it once: -benchtime=1x.
func BenchmarkOperators(b *testing.B) {
	burst, watched, rounds := sizes()
	installCRD(b)
	dir := buildOperators(b)
	dyn := dynamic.NewForConfigOrDie(env.Config(b))
	sides := []*side{
		{name: "tailplane runtime, success Events off (as tailplane-operator)", bin: filepath.Join(dir, "runtime-op"), args: []string{"-quiet-success"}},
		{name: "tailplane runtime, success Events posted (the runtime's default)", bin: filepath.Join(dir, "runtime-op")},
		{name: "controller-runtime v0.25.2", bin: filepath.Join(dir, "crt-op")},
	}
	b.ResetTimer()
	for range b.N {
		for round := range rounds {
			for _, s := range sides {
				ns := env.Namespace(b)
				p := startOperator(b, s.bin, ns, workers, s.args...)
				done, stop := handledWatch(b, dyn, ns, burst)
				began := time.Now()
				createWidgets(b, dyn, ns, burst)
				created := time.Since(began)
				waitHandled(b, done, p, s.name)
				elapsed := time.Since(began)
				stop()
				p.stop()
				s.rates = append(s.rates, float64(burst)/elapsed.Seconds())
				b.Logf("round %d %s: %d objects created in %s, all handled after %s", round+1, s.name, burst,
					created.Round(time.Millisecond), elapsed.Round(time.Millisecond))
			}
		}
		for _, s := range sides {
			ns := env.Namespace(b)
			createWidgets(b, dyn, ns, watched)
			done, stop := handledWatch(b, dyn, ns, watched)
			p := startOperator(b, s.bin, ns, workers, s.args...)
			waitHandled(b, done, p, s.name)
			stop()
			s.rss = p.peakRSS(b)
			p.stop()
		}
	}
	b.StopTimer()
	quiet, loud, crt := sides[0], sides[1], sides[2]
	b.ReportMetric(median(quiet.rates), "runtime-obj/s")
	b.ReportMetric(median(loud.rates), "runtime-events-obj/s")
	b.ReportMetric(median(crt.rates), "controller-runtime-obj/s")
	b.ReportMetric(quiet.rss, "runtime-peak-RSS-MiB")
	b.ReportMetric(loud.rss, "runtime-events-peak-RSS-MiB")
	b.ReportMetric(crt.rss, "controller-runtime-peak-RSS-MiB")
	fmt.Printf("\n%d workers each; throughput: %d objects created in a burst, median of %d interleaved rounds; RSS: %d objects watched\n\n",
		workers, burst, rounds, watched)
	fmt.Println("| operator | objects/s (median) | rounds | peak RSS, 10k watched (MiB) | ratio to controller-runtime (objects/s, RSS) |")
	fmt.Println("|---|---|---|---|---|")
	for _, s := range sides {
		ratio := ""
		if s != crt {
			ratio = fmt.Sprintf("%.2fx, %.2fx", median(s.rates)/median(crt.rates), s.rss/crt.rss)
		}
		fmt.Printf("| %s | %.0f | %s | %.1f | %s |\n", s.name, median(s.rates), rates(s.rates), s.rss, ratio)
	}
	fmt.Println()
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func rates(v []float64) string {
	out := ""
	for i, r := range v {
		if i > 0 {
			out += ", "
		}
		out += strconv.FormatFloat(r, 'f', 0, 64)
	}
	return out
}
