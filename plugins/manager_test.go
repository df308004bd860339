package plugins_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/charmbracelet/log"

	"github.com/tailplane/tailplane/internal/syncbuf"
	"github.com/tailplane/tailplane/plugins"
	"github.com/tailplane/tailplane/plugins/host"
	"github.com/tailplane/tailplane/plugins/internal/wasmbuild"
	"github.com/tailplane/tailplane/proxy/route"
)

func newManager(t *testing.T) *plugins.Manager {
	t.Helper()
	logs := &syncbuf.Buffer{}
	m, err := plugins.New(plugins.Options{CacheDir: wasmbuild.CompilationCacheDir(t), Logger: log.New(logs)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = m.Close(context.Background())
		if t.Failed() {
			t.Logf("logs:\n%s", logs.String())
		}
	})
	return m
}

// redirectSpec redirects every path to /<to>/<path>.
func redirectSpec(module []byte, name, to string, order int) plugins.Spec {
	return plugins.Spec{Order: order, Config: host.Config{
		Name: name, Module: module, Timeout: 10 * time.Second,
		PluginConfig: fmt.Appendf(nil, `{"rules":[{"match":"^/(.*)$","to":"/%s/$1","status":307}]}`, to),
	}}
}

func req(path string) *route.Request {
	return &route.Request{Method: "GET", Host: "h", URI: path, Path: path, Header: http.Header{}}
}

func mustLoad(t *testing.T, st []plugins.Status) {
	t.Helper()
	for _, s := range st {
		if !s.Loaded || s.Error != "" {
			t.Fatalf("plugin %s: %+v", s.Name, s)
		}
	}
}

// Plugins run in declared order (not list order) and the first answer ends
// the chain.
func TestChainRunsInDeclaredOrder(t *testing.T) {
	m := newManager(t)
	mod := wasmbuild.Go(t, "./plugins/examples/redirect")
	mustLoad(t, m.Apply(context.Background(), []plugins.Spec{redirectSpec(mod, "second", "b", 20), redirectSpec(mod, "first", "a", 10)}))
	d, err := m.Route(context.Background(), req("/x"), route.Decision{})
	if err != nil || d.Action != route.Redirect || d.Location != "/a/x" {
		t.Fatalf("decision %+v, %v; want the order-10 plugin's redirect", d, err)
	}
	mustLoad(t, m.Apply(context.Background(), []plugins.Spec{redirectSpec(mod, "second", "b", 5), redirectSpec(mod, "first", "a", 10)}))
	if d, _ := m.Route(context.Background(), req("/x"), route.Decision{}); d.Location != "/b/x" {
		t.Fatalf("after reordering: %+v", d)
	}
}

// trapModule is the smallest http-wasm guest whose handle_request traps.
var trapModule = []byte("\x00asm\x01\x00\x00\x00" +
	"\x01\x0a\x02\x60\x00\x01\x7e\x60\x02\x7f\x7f\x00" + // types: ()->i64, (i32,i32)->()
	"\x03\x03\x02\x00\x01" + // functions
	"\x05\x03\x01\x00\x01" + // one memory page
	"\x07\x2d\x03\x06memory\x02\x00\x0ehandle_request\x00\x00\x0fhandle_response\x00\x01" +
	"\x0a\x08\x02\x03\x00\x00\x0b\x02\x00\x0b") // unreachable; nothing

// Failures are those of each plugin's serving generation: a trapping
// plugin counts its failures, a healthy one its requests only, and a
// reload starts the count again.
func TestFailuresOfTheServingGenerations(t *testing.T) {
	m := newManager(t)
	mod := wasmbuild.Go(t, "./plugins/examples/redirect")
	trap := plugins.Spec{Config: host.Config{Name: "trap", Module: trapModule, FailurePolicy: host.FailOpen, Timeout: 10 * time.Second}}
	mustLoad(t, m.Apply(context.Background(), []plugins.Spec{trap, redirectSpec(mod, "r", "v1", 10)}))
	for range 3 {
		if d, _ := m.Route(context.Background(), req("/x"), route.Decision{}); d.Location != "/v1/x" {
			t.Fatalf("the fail-open trap should be skipped: %+v", d)
		}
	}
	f := m.Failures()
	if tr := f["trap"]; tr.Requests != 3 || tr.Failed != 3 || tr.ByClass[host.FailureTrap] != 3 || !strings.Contains(tr.LastError, "unreachable") {
		t.Errorf("trap: %+v", tr)
	}
	if r := f["r"]; r.Requests != 3 || r.Failed != 0 {
		t.Errorf("healthy plugin: %+v", r)
	}
	trap.Timeout = 5 * time.Second // a new generation
	mustLoad(t, m.Apply(context.Background(), []plugins.Spec{trap, redirectSpec(mod, "r", "v1", 10)}))
	if tr := m.Failures()["trap"]; tr.Requests != 0 || tr.Failed != 0 {
		t.Errorf("after a reload: %+v, want a fresh count", tr)
	}
}

// Only runs a subset of the chain (one Tailscale Service's plugins), in
// chain order, and follows reloads like the whole chain.
func TestOnlyRunsTheNamedPlugins(t *testing.T) {
	m := newManager(t)
	mod := wasmbuild.Go(t, "./plugins/examples/redirect")
	mustLoad(t, m.Apply(context.Background(), []plugins.Spec{redirectSpec(mod, "first", "a", 10), redirectSpec(mod, "second", "b", 20)}))
	if d, err := m.Only([]string{"second"}).Route(context.Background(), req("/x"), route.Decision{}); err != nil || d.Location != "/b/x" {
		t.Fatalf("Only(second): %+v, %v; want second's redirect", d, err)
	}
	if d, _ := m.Only([]string{"second", "first"}).Route(context.Background(), req("/x"), route.Decision{}); d.Location != "/a/x" {
		t.Fatalf("Only(second, first): %+v; want chain order (first)", d)
	}
	if d, _ := m.Only(nil).Route(context.Background(), req("/x"), route.Decision{}); d.Action != route.Forward {
		t.Fatalf("Only(none): %+v; want no plugin to run", d)
	}
}

// Reloads swap atomically while requests flow: every request gets exactly
// one generation's answer, none fails, and after Apply returns new requests
// see the new generation.
func TestHotReloadUnderLoad(t *testing.T) {
	m := newManager(t)
	mod := wasmbuild.Go(t, "./plugins/examples/redirect")
	mustLoad(t, m.Apply(context.Background(), []plugins.Spec{redirectSpec(mod, "r", "gen0", 0)}))
	var stop atomic.Bool
	var bad atomic.Value
	var served atomic.Int64
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				d, err := m.Route(context.Background(), req("/p"), route.Decision{})
				if err != nil || d.Action != route.Redirect || !strings.HasPrefix(d.Location, "/gen") || !strings.HasSuffix(d.Location, "/p") {
					bad.Store(fmt.Sprintf("%+v %v", d, err))
				}
				served.Add(1)
			}
		}()
	}
	for gen := 1; gen <= 4; gen++ {
		mustLoad(t, m.Apply(context.Background(), []plugins.Spec{redirectSpec(mod, "r", fmt.Sprintf("gen%d", gen), 0)}))
		want := fmt.Sprintf("/gen%d/p", gen)
		if d, _ := m.Route(context.Background(), req("/p"), route.Decision{}); d.Location != want {
			t.Errorf("after reload %d: %q, want %q", gen, d.Location, want)
		}
	}
	stop.Store(true)
	wg.Wait()
	if v := bad.Load(); v != nil {
		t.Fatalf("a request during reloads got %v", v)
	}
	if served.Load() == 0 {
		t.Fatal("no request ran during the reloads")
	}
}

// A fail-closed plugin that cannot load answers 503 rather than be
// skipped; a fail-open one is skipped; a failed reload keeps the old
// generation serving, and the status says why.
func TestLoadFailuresInTheChain(t *testing.T) {
	m := newManager(t)
	mod := wasmbuild.Go(t, "./plugins/examples/redirect")
	broken := plugins.Spec{Config: host.Config{Name: "broken", Module: []byte("not wasm")}}
	st := m.Apply(context.Background(), []plugins.Spec{broken})
	if len(st) != 1 || st[0].Loaded || !strings.Contains(st[0].Error, "not a WebAssembly module") {
		t.Fatalf("status %+v", st)
	}
	if d, _ := m.Route(context.Background(), req("/"), route.Decision{}); d.Action != route.Deny || d.Status != 503 || strings.Contains(d.Body, "WebAssembly") {
		t.Fatalf("fail-closed stand-in: %+v", d)
	}
	broken.FailurePolicy = host.FailOpen
	m.Apply(context.Background(), []plugins.Spec{broken})
	if d, _ := m.Route(context.Background(), req("/"), route.Decision{}); d.Action != route.Forward {
		t.Fatalf("fail-open plugin was not skipped: %+v", d)
	}

	good := redirectSpec(mod, "r", "v1", 0)
	mustLoad(t, m.Apply(context.Background(), []plugins.Spec{good}))
	bad := good
	bad.SHA256 = strings.Repeat("0", 64)
	st = m.Apply(context.Background(), []plugins.Spec{bad})
	if !st[0].Loaded || !strings.Contains(st[0].Error, "sha256 mismatch") {
		t.Fatalf("status after a failed reload: %+v", st)
	}
	if d, _ := m.Route(context.Background(), req("/x"), route.Decision{}); d.Location != "/v1/x" {
		t.Fatalf("the old generation should keep serving: %+v", d)
	}
}
