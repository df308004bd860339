package main

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/log"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/tailplane/tailplane/internal/kubestate"
	"github.com/tailplane/tailplane/internal/proxystate"
	"github.com/tailplane/tailplane/internal/testenv"
	"github.com/tailplane/tailplane/internal/testpoll"
	"github.com/tailplane/tailplane/proxy/config"
	"github.com/tailplane/tailplane/proxy/route"
)

var env = testenv.New()

func TestMain(m *testing.M) { os.Exit(env.Run(m)) }

// The operator hands the proxy a RoutingPlugin spec whose module is a copy in
// the proxy's namespace; the proxy resolves it there and reports the outcome
// under the RoutingPlugin's name in its state Secret.
func TestPluginLoaderReportsInStateSecret(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	kube, ns, loader := newTestLoader(ctx, t)
	spec := `{"module":{"secretKeyRef":{"name":"plugin-canary","key":"module.wasm.gz"},"sha256":"` + strings.Repeat("ab", 32) + `"},
	  "order":1,"failurePolicy":"Open","timeout":"100ms","capabilities":["route"]}`
	ps := []config.Plugin{{Name: "apps/canary", Spec: json.RawMessage(spec)}}

	got, err := loader.spec(ps[0])
	if err != nil {
		t.Fatal(err)
	}
	if got.Name != "apps/canary" || got.Source == nil || got.Source.Namespace != ns || got.Source.Name != "plugin-canary" || got.Source.Key != "module.wasm.gz" {
		t.Fatalf("spec = %+v (source %+v); want the module resolved in the proxy's namespace %s under the operator's name", got, got.Source, ns)
	}

	// The module copy does not exist: the config is still served (the plugin's
	// failure policy decides per request) and the reason is reported.
	if _, err := loader.routers(ctx, ps); err != nil {
		t.Fatalf("a plugin that fails to load refused the whole config: %v", err)
	}
	sec, err := kube.CoreV1().Secrets(ns).Get(ctx, "proxy-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var reports []proxystate.PluginReport
	if err := json.Unmarshal(sec.Data[proxystate.KeyPluginStatus], &reports); err != nil {
		t.Fatalf("plugin_status = %q: %v", sec.Data[proxystate.KeyPluginStatus], err)
	}
	if len(reports) != 1 || reports[0].Name != "apps/canary" || reports[0].Loaded || reports[0].Error == "" {
		t.Fatalf("plugin_status = %+v; want one failed report for apps/canary with its reason", reports)
	}

	// A spec that is not a RoutingPlugin spec refuses the config with the
	// plugin's index and name.
	bad := []config.Plugin{{Name: "apps/broken", Spec: json.RawMessage(`{"module":{}}`)}}
	if _, err := loader.routers(ctx, bad); err == nil || !strings.Contains(err.Error(), "plugins[0]") {
		t.Fatalf("bad spec: err = %v, want a refusal naming plugins[0]", err)
	}
}

// noopModule is the smallest http-wasm guest: it exports memory,
// handle_request (always "pass on") and handle_response.
var noopModule = []byte("\x00asm\x01\x00\x00\x00" +
	"\x01\x0a\x02\x60\x00\x01\x7e\x60\x02\x7f\x7f\x00" + // types: ()->i64, (i32,i32)->()
	"\x03\x03\x02\x00\x01" + // functions
	"\x05\x03\x01\x00\x01" + // one memory page
	"\x07\x2d\x03\x06memory\x02\x00\x0ehandle_request\x00\x00\x0fhandle_response\x00\x01" +
	"\x0a\x09\x02\x04\x00\x42\x01\x0b\x02\x00\x0b") // i64.const 1; nothing

// A plugin that failed to load is retried with backoff, not only on the
// next config change: a fail-closed plugin whose module copy was not
// readable yet answers 503 until the copy exists, then loads by itself,
// and plugin_status follows.
func TestPluginLoaderRetriesFailedLoads(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	kube, ns, loader := newTestLoader(ctx, t)
	sum := sha256.Sum256(noopModule)
	digest := hex.EncodeToString(sum[:])
	spec := `{"module":{"secretKeyRef":{"name":"plugin-gate","key":"module.wasm"},"sha256":"` + digest + `"},
	  "failurePolicy":"Closed","timeout":"100ms"}`
	routers, err := loader.routers(ctx, []config.Plugin{{Name: "apps/gate", Spec: json.RawMessage(spec)}})
	if err != nil || len(routers) != 1 {
		t.Fatalf("routers: %v, %v", routers, err)
	}
	decide := func() route.Decision {
		req := &route.Request{Method: "GET", Host: "h", URI: "/", Path: "/", Header: http.Header{},
			Route: &route.Route{Path: "/", Backends: []route.Backend{{Name: "apps/web:80", Address: "10.0.0.1:80"}}}}
		d, err := routers[0].Route(ctx, req, route.Decision{Action: route.Forward, Backend: &req.Route.Backends[0]})
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	if d := decide(); d.Action != route.Deny || d.Status != http.StatusServiceUnavailable {
		t.Fatalf("fail-closed plugin without its module: %+v, want 503", d)
	}
	reports := func() ([]proxystate.PluginReport, error) { return pluginReports(ctx, kube, ns) }
	if r, err := reports(); err != nil || len(r) != 1 || r[0].Loaded || r[0].Error == "" {
		t.Fatalf("plugin_status = %+v, %v; want the failure", r, err)
	}

	// The operator's copy appears; no config change follows.
	copied := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "plugin-gate", Namespace: ns}, Data: map[string][]byte{"module.wasm": noopModule}}
	if _, err := kube.CoreV1().Secrets(ns).Create(ctx, copied, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testpoll.Until(t, 30*time.Second, "the plugin to load by itself", func() error {
		r, err := reports()
		if err != nil {
			return err
		}
		if len(r) != 1 || !r[0].Loaded || r[0].SHA256 != digest || r[0].Error != "" {
			return fmt.Errorf("plugin_status = %+v", r)
		}
		if d := decide(); d.Action != route.Forward {
			return fmt.Errorf("decision %+v, want the request passed on", d)
		}
		return nil
	})
}

// newTestLoader starts a plugin loader for proxy-0 in a fresh namespace.
func newTestLoader(ctx context.Context, t *testing.T) (kubernetes.Interface, string, *pluginLoader) {
	t.Helper()
	kube := env.Clientset(t)
	ns := env.Namespace(t)
	state, err := kubestate.New(ctx, kube, ns, "proxy-0")
	if err != nil {
		t.Fatal(err)
	}
	loader, err := newPluginLoader(kube, ns, t.TempDir(), state, nil, log.New(io.Discard))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = loader.manager.Close(context.Background()) })
	return kube, ns, loader
}

// withCustomSection appends a custom section of n incompressible bytes: a
// module of any size that still loads.
func withCustomSection(mod []byte, n int) []byte {
	payload := append([]byte{3, 'p', 'a', 'd'}, make([]byte, n)...)
	_, _ = rand.Read(payload[4:])
	out := append(slices.Clone(mod), 0)
	for v := uint32(len(payload)); ; v >>= 7 {
		if v < 0x80 {
			out = append(out, byte(v))
			break
		}
		out = append(out, byte(v&0x7f)|0x80)
	}
	return append(out, payload...)
}

// A module bigger than a Secret arrives as the operator's chunks (several
// Secrets read in order, gzip, pinned); the proxy keeps it on disk by
// digest, so neither a restart with the same scratch folder nor a change
// of the plugin's other settings reads the chunks again.
func TestPluginLoaderReadsChunksAndCachesByDigest(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	kube := env.Clientset(t)
	ns := env.Namespace(t)
	cacheDir := t.TempDir()
	mod := withCustomSection(noopModule, 2<<20)
	names, digest := storeChunks(ctx, t, kube, ns, mod)
	if len(names) < 3 {
		t.Fatalf("%d chunks; the test needs a module of several Secrets", len(names))
	}
	chunks, _ := json.Marshal(names)
	spec := func(timeout string) []config.Plugin {
		return []config.Plugin{{Name: "apps/big", Spec: json.RawMessage(`{"module":{"secretKeyRef":{"name":"` + names[0] + `","key":"module.wasm.gz"},
		  "secretChunks":` + string(chunks) + `,"sha256":"` + digest + `"},"failurePolicy":"Closed","timeout":"` + timeout + `"}`)}}
	}
	load := func(what string, l *pluginLoader, ps []config.Plugin) {
		t.Helper()
		if _, err := l.routers(ctx, ps); err != nil {
			t.Fatal(err)
		}
		st := l.manager.Statuses()
		if len(st) != 1 || !st[0].Loaded || st[0].Error != "" || st[0].SHA256 != digest || st[0].Size != len(mod) {
			t.Fatalf("%s: status %+v, want the %d-byte module %s loaded", what, st, len(mod), digest)
		}
	}
	first, err := newPluginLoader(kube, ns, cacheDir, nil, nil, log.New(io.Discard))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = first.manager.Close(context.Background()) })
	load("from the chunks", first, spec("1s"))

	// The chunks go away (the API server is not asked again).
	for _, n := range names {
		if err := kube.CoreV1().Secrets(ns).Delete(ctx, n, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	load("other settings, same module", first, spec("2s"))
	restarted, err := newPluginLoader(kube, ns, cacheDir, nil, nil, log.New(io.Discard))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = restarted.manager.Close(context.Background()) })
	load("after a restart", restarted, spec("2s"))

	// Without the disk cache (a new scratch folder) the module is gone.
	fresh, err := newPluginLoader(kube, ns, t.TempDir(), nil, nil, log.New(io.Discard))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = fresh.manager.Close(context.Background()) })
	if _, err := fresh.routers(ctx, spec("2s")); err != nil {
		t.Fatal(err)
	}
	if st := fresh.manager.Statuses(); len(st) != 1 || st[0].Loaded || !strings.Contains(st[0].Error, "not found") {
		t.Fatalf("without the cache: %+v, want the chunks not found", st)
	}
}

// pluginReports reads plugin_status from the state Secret proxy-0 of ns.
func pluginReports(ctx context.Context, kube kubernetes.Interface, ns string) ([]proxystate.PluginReport, error) {
	sec, err := kube.CoreV1().Secrets(ns).Get(ctx, "proxy-0", metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	var r []proxystate.PluginReport
	err = json.Unmarshal(sec.Data[proxystate.KeyPluginStatus], &r)
	return r, err
}

// The plugin host's metrics go to the registry the proxy serves, not to a
// registry of the manager's own: a second loader on the same registry
// finds them taken.
func TestPluginMetricsOnProxyRegistry(t *testing.T) {
	reg := prometheus.NewRegistry()
	if _, err := newPluginLoader(fake.NewClientset(), "ns", t.TempDir(), nil, reg, log.New(io.Discard)); err != nil {
		t.Fatal(err)
	}
	if _, err := newPluginLoader(fake.NewClientset(), "ns", t.TempDir(), nil, reg, log.New(io.Discard)); err == nil || !strings.Contains(err.Error(), "register plugin metrics") {
		t.Fatalf("second loader on one registry: err = %v, want the metrics already registered", err)
	}
}
