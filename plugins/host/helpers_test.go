package host_test

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/charmbracelet/log"

	"github.com/tailplane/tailplane/internal/syncbuf"
	"github.com/tailplane/tailplane/plugins/host"
	"github.com/tailplane/tailplane/plugins/internal/wasmbuild"
	"github.com/tailplane/tailplane/proxy/route"
)

// guests caches built modules for the whole test binary.
type guests struct {
	mu    sync.Mutex
	built map[string][]byte
}

var built = &guests{built: map[string][]byte{}}

func guest(t testing.TB, pkg string) []byte {
	t.Helper()
	built.mu.Lock()
	defer built.mu.Unlock()
	if b, ok := built.built[pkg]; ok {
		return b
	}
	b := wasmbuild.Go(t, pkg)
	built.built[pkg] = b
	return b
}

func newEngine(t testing.TB) (*host.Engine, *syncbuf.Buffer) {
	t.Helper()
	logs := &syncbuf.Buffer{}
	e, err := host.NewEngine(host.EngineOptions{
		CacheDir: wasmbuild.CompilationCacheDir(t),
		Logger:   log.NewWithOptions(logs, log.Options{Level: log.DebugLevel}),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close(context.Background()) })
	return e, logs
}

func load(t testing.TB, e *host.Engine, cfg host.Config) *host.Plugin {
	t.Helper()
	p, err := e.Load(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close(context.Background()) })
	return p
}

// metric sums the counters or gauges matching labels from the engine's registry.
func metric(t testing.TB, e *host.Engine, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := e.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if v, ok := labels[lp.GetName()]; ok && v != lp.GetValue() {
					continue next
				}
			}
			if m.Counter != nil {
				sum += m.GetCounter().GetValue()
			} else {
				sum += m.GetGauge().GetValue()
			}
		}
	}
	return sum
}

func testRoute() *route.Route {
	return &route.Route{Host: "app.example.ts.net", Path: "/", PathType: "Prefix", Backends: []route.Backend{
		{Name: "web:80", Address: "10.0.0.1:80"}, {Name: "web-canary:80", Address: "10.0.0.2:80"},
	}}
}

func request(uri string) *route.Request {
	path, _, _ := strings.Cut(uri, "?")
	return &route.Request{Method: "GET", Host: "app.example.ts.net", URI: uri, Path: path, Header: http.Header{"User-Agent": {"test"}},
		Identity: &route.Identity{LoginName: "alice@example.com", NodeName: "laptop", Tags: nil}, Route: testRoute()}
}
