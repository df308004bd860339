package bench_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/charmbracelet/log"

	"github.com/tailplane/tailplane/plugins/host"
	"github.com/tailplane/tailplane/plugins/internal/wasmbuild"
	"github.com/tailplane/tailplane/plugins/sdk/abi"
	"github.com/tailplane/tailplane/proxy/config"
	"github.com/tailplane/tailplane/proxy/l7"
	"github.com/tailplane/tailplane/proxy/metrics"
	"github.com/tailplane/tailplane/proxy/route"
	"github.com/tailplane/tailplane/proxy/routetable"
)

const canaryConfig = `{"header":"X-Canary","headerValue":"always","cookie":"canary","cookieValue":"1"}`

type guestKind struct {
	name    string
	module  func(testing.TB) []byte
	config  string
	timeout time.Duration
}

func guests() []guestKind {
	goGuest := func(tb testing.TB) []byte { return wasmbuild.Go(tb, "./plugins/examples/canary") }
	return []guestKind{
		{"go-guest", goGuest, canaryConfig, 0},
		{"go-guest-nodeadline", goGuest, canaryConfig, -1},
		{"as-guest", wasmbuild.AssemblyScript, "", 0},
		{"as-guest-nodeadline", wasmbuild.AssemblyScript, "", -1},
	}
}

func quiet() *log.Logger { return log.NewWithOptions(io.Discard, log.Options{Level: log.ErrorLevel}) }

func engine(tb testing.TB, cacheDir string) *host.Engine {
	tb.Helper()
	e, err := host.NewEngine(host.EngineOptions{CacheDir: cacheDir, Logger: quiet()})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = e.Close(context.Background()) })
	return e
}

func loadGuest(tb testing.TB, g guestKind, pool int, config string) *host.Plugin {
	tb.Helper()
	p, err := engine(tb, wasmbuild.CompilationCacheDir(tb)).Load(context.Background(), host.Config{
		Name: g.name, Module: g.module(tb), PluginConfig: []byte(config), Capabilities: []abi.Capability{abi.CapRoute},
		Timeout: g.timeout, PoolSize: pool, Prewarm: pool,
	})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = p.Close(context.Background()) })
	return p
}

// nativeCanary is the canary decision written as a native Go router.
func nativeCanary() route.Router {
	return route.RouterFunc(func(_ context.Context, req *route.Request, prev route.Decision) (route.Decision, error) {
		if req.Header.Get("X-Canary") == "always" && req.Route != nil && len(req.Route.Backends) > 1 {
			b := req.Route.Backends[1]
			prev.Backend = &b
		}
		return prev, nil
	})
}

func canaryRequest() *route.Request {
	return &route.Request{Method: "GET", Host: "app.example.ts.net", URI: "/api/items?page=2", Path: "/api/items",
		Header:   http.Header{"X-Canary": {"always"}, "User-Agent": {"bench"}, "Accept": {"*/*"}},
		Identity: &route.Identity{LoginName: "alice@example.com", NodeName: "laptop"},
		Route: &route.Route{Host: "app.example.ts.net", Path: "/api", PathType: "Prefix", Backends: []route.Backend{
			{Name: "web:80", Address: "10.0.0.1:80"}, {Name: "web-canary:80", Address: "10.0.0.2:80"}}}}
}

// BenchmarkDecision: cost of one routing decision, at 1 and 16 callers.
func BenchmarkDecision(b *testing.B) {
	routers := []struct {
		name string
		r    func(testing.TB, int) route.Router
	}{{"native", func(testing.TB, int) route.Router { return nativeCanary() }}}
	for _, g := range guests() {
		routers = append(routers, struct {
			name string
			r    func(testing.TB, int) route.Router
		}{g.name, func(tb testing.TB, pool int) route.Router { return loadGuest(tb, g, pool, g.config) }})
	}
	for _, rt := range routers {
		for _, conc := range []int{1, 16} {
			b.Run(rt.name+"/c"+itoa(conc), func(b *testing.B) {
				decide(b, rt.r(b, conc), conc)
			})
		}
	}
}

func decide(b *testing.B, r route.Router, conc int) {
	ctx := context.Background()
	if d, err := r.Route(ctx, canaryRequest(), route.Decision{}); err != nil || d.Backend == nil || d.Backend.Name != "web-canary:80" {
		b.Fatalf("wrong decision: %+v, %v", d, err)
	}
	var mu sync.Mutex
	var all []time.Duration
	b.SetParallelism(max(1, conc/runtime.GOMAXPROCS(0)))
	if conc == 1 {
		b.SetParallelism(1)
	}
	b.ResetTimer()
	run := func(next func() bool) {
		req := canaryRequest()
		samples := make([]time.Duration, 0, 1024)
		for next() {
			start := time.Now()
			_, _ = r.Route(ctx, req, route.Decision{})
			samples = append(samples, time.Since(start))
		}
		mu.Lock()
		all = append(all, samples...)
		mu.Unlock()
	}
	if conc == 1 {
		i := 0
		run(func() bool { i++; return i <= b.N })
	} else {
		b.RunParallel(func(pb *testing.PB) { run(pb.Next) })
	}
	b.StopTimer()
	reportPercentiles(b, all)
}

func reportPercentiles(b *testing.B, d []time.Duration) {
	if len(d) == 0 {
		return
	}
	slices.Sort(d)
	b.ReportMetric(float64(d[len(d)/2].Nanoseconds()), "p50-ns")
	b.ReportMetric(float64(d[len(d)*99/100].Nanoseconds()), "p99-ns")
}

func itoa(i int) string {
	if i < 10 {
		return string(rune('0' + i))
	}
	return itoa(i/10) + string(rune('0'+i%10))
}

// BenchmarkHTTP: requests/s through the proxy's L7 handler and a reverse
// proxied round trip to a real backend, with and without a plugin. The
// variants run in alternating blocks (see interleave), so machine noise hits
// them alike.
func BenchmarkHTTP(b *testing.B) {
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "ok")
	}))
	defer backend.Close()
	addr := strings.TrimPrefix(backend.URL, "http://")
	// The table's route has one backend, "web"; the canary plugin picks it
	// explicitly (the allowlist is the table's).
	cfg := `{"header":"X-Canary","headerValue":"always","backend":"web"}`
	var variants []variant
	add := func(name string, extra route.Router) {
		table := routetable.New(&config.L7{DefaultBackend: &config.Backend{Service: "web", Address: addr}})
		chain := l7.Chain{table}
		if extra != nil {
			chain = append(chain, extra)
		}
		h := l7.NewHandler(func(context.Context, string) (*route.Identity, error) {
			return &route.Identity{LoginName: "alice@example.com", NodeName: "laptop"}, nil
		}, l7.NewTransport(), metrics.New(), quiet())
		h.SetRoutes(&l7.Routes{Table: table, Routers: chain})
		front := httptest.NewUnstartedServer(h.Listener(false))
		front.Config.ConnContext = l7.ConnContext
		front.Start()
		b.Cleanup(front.Close)
		client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
		variants = append(variants, variant{name, client, front.URL + "/api/items"})
	}
	add("table-only", nil)
	add("table+native", nativeCanary())
	for _, g := range guests() {
		add("table+"+g.name, loadGuest(b, g, 16, cfg))
	}
	interleave(b, variants)
}

// variant is one server to measure.
type variant struct {
	name   string
	client *http.Client
	url    string
}

func (v variant) get() error {
	req, _ := http.NewRequest("GET", v.url, nil)
	req.Header.Set("X-Canary", "always")
	resp, err := v.client.Do(req)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != 200 {
		return &statusError{resp.StatusCode}
	}
	return nil
}

// interleave measures each variant with 16 concurrent clients, in blocks of
// blockTime taken in turn (the order rotating each round), b.N × rounds
// rounds. It reports wall-clock "<name>-req/s" and the process's CPU time
// per request ("<name>-cpu-us/req") over all rounds, and against the first
// variant "<name>-delta-%" (wall-clock requests/s) and "<name>-cpu-delta-%"
// (the throughput change at full CPU): each the median of the per-round
// ratios, so a burst of load from another process spoils one round, not
// the result.
func interleave(b *testing.B, variants []variant) {
	const (
		clients   = 16
		blockTime = 250 * time.Millisecond
		rounds    = 12
	)
	for _, v := range variants {
		if err := v.get(); err != nil {
			b.Fatalf("%s: %v", v.name, err)
		}
	}
	count := make([]int64, len(variants))
	errs := make([]int64, len(variants))
	cpu := make([]time.Duration, len(variants))
	lastErr := make([]error, len(variants))
	spent := make([]time.Duration, len(variants))
	rateRatios := make([][]float64, len(variants))
	cpuRatios := make([][]float64, len(variants))
	b.ResetTimer()
	for n := range b.N * rounds {
		roundCount := make([]int64, len(variants))
		roundCPU := make([]time.Duration, len(variants))
		roundTime := make([]time.Duration, len(variants))
		for k := range variants {
			i := (k + n) % len(variants)
			var wg sync.WaitGroup
			var mu sync.Mutex
			cpuBefore := cpuTime(b)
			start := time.Now()
			end := start.Add(blockTime)
			for range clients {
				wg.Add(1)
				go func() {
					defer wg.Done()
					done := int64(0)
					failed := int64(0)
					var last error
					for time.Now().Before(end) {
						if err := variants[i].get(); err != nil {
							failed, last = failed+1, err
							continue
						}
						done++
					}
					mu.Lock()
					roundCount[i] += done
					count[i] += done
					errs[i] += failed
					if last != nil {
						lastErr[i] = last
					}
					mu.Unlock()
				}()
			}
			wg.Wait()
			roundTime[i] = time.Since(start)
			roundCPU[i] = cpuTime(b) - cpuBefore
			spent[i] += roundTime[i]
			cpu[i] += roundCPU[i]
		}
		if roundCount[0] == 0 {
			continue
		}
		for i := 1; i < len(variants); i++ {
			if roundCount[i] == 0 {
				continue
			}
			rateRatios[i] = append(rateRatios[i], (float64(roundCount[i])/roundTime[i].Seconds())/(float64(roundCount[0])/roundTime[0].Seconds()))
			cpuPerReq := func(j int) float64 { return roundCPU[j].Seconds() / float64(roundCount[j]) }
			cpuRatios[i] = append(cpuRatios[i], cpuPerReq(0)/cpuPerReq(i))
		}
	}
	b.StopTimer()
	for i, v := range variants {
		// A rare dropped connection on a loaded machine is noise; more is a bug.
		if errs[i]*100 > count[i]+errs[i] {
			b.Fatalf("%s: %d of %d requests failed, last: %v", v.name, errs[i], count[i]+errs[i], lastErr[i])
		}
	}
	for i, v := range variants {
		b.ReportMetric(float64(count[i])/spent[i].Seconds(), v.name+"-req/s")
		b.ReportMetric(float64(cpu[i].Microseconds())/float64(count[i]), v.name+"-cpu-us/req")
		if i > 0 {
			b.ReportMetric((median(rateRatios[i])-1)*100, v.name+"-delta-%")
			// CPU-bound, requests/s scale with 1/CPU per request: this is
			// the throughput change the plugin causes, immune to other
			// processes' load on the machine.
			b.ReportMetric((median(cpuRatios[i])-1)*100, v.name+"-cpu-delta-%")
		}
	}
}

// median returns the middle value of xs (the mean of the two middle ones
// for an even count), 1 for none.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 1
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// cpuTime is the process's user+system CPU time so far.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkColdLoad: time from bytes to a plugin ready to serve, compiling
// (fresh in-memory cache) or from the warm file compilation cache.
func BenchmarkColdLoad(b *testing.B) {
	for _, g := range guests() {
		if g.timeout < 0 {
			continue
		}
		for _, mode := range []string{"compile", "file-cache"} {
			b.Run(g.name+"/"+mode, func(b *testing.B) {
				module := g.module(b)
				cacheDir := ""
				if mode == "file-cache" {
					cacheDir = wasmbuild.CompilationCacheDir(b)
					loadGuest(b, g, 1, g.config) // make sure the cache holds it
				}
				b.ResetTimer()
				for range b.N {
					e, err := host.NewEngine(host.EngineOptions{CacheDir: cacheDir, Logger: quiet()})
					if err != nil {
						b.Fatal(err)
					}
					p, err := e.Load(context.Background(), host.Config{Name: g.name, Module: module, PluginConfig: []byte(g.config), Capabilities: []abi.Capability{abi.CapRoute}})
					if err != nil {
						b.Fatal(err)
					}
					b.StopTimer()
					_ = p.Close(context.Background())
					_ = e.Close(context.Background())
					b.StartTimer()
				}
				b.ReportMetric(float64(len(module)), "module-B")
			})
		}
	}
}

// BenchmarkInstanceMemory: Go heap and guest linear memory per instance
// (8 pre-warmed instances per op).
func BenchmarkInstanceMemory(b *testing.B) {
	const n = 8
	for _, g := range guests() {
		if g.timeout < 0 {
			continue
		}
		b.Run(g.name, func(b *testing.B) {
			module := g.module(b)
			e := engine(b, wasmbuild.CompilationCacheDir(b))
			var heap, linear float64
			for range b.N {
				var before, after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				p, err := e.Load(context.Background(), host.Config{Name: g.name, Module: module, PluginConfig: []byte(g.config),
					Capabilities: []abi.Capability{abi.CapRoute}, PoolSize: n, Prewarm: n})
				if err != nil {
					b.Fatal(err)
				}
				runtime.GC()
				runtime.ReadMemStats(&after)
				heap += float64(after.HeapAlloc-before.HeapAlloc) / n
				linear += float64(p.InstanceMemory())
				_ = p.Close(context.Background())
			}
			b.ReportMetric(heap/float64(b.N), "heap-B/inst")
			b.ReportMetric(linear/float64(b.N), "linear-B/inst")
		})
	}
}
