package proxy

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tailplane/tailplane/internal/tailnettest"
	"github.com/tailplane/tailplane/internal/testpoll"
	"github.com/tailplane/tailplane/proxy/config"
	"github.com/tailplane/tailplane/proxy/route"
)

// Reloading the config repeatedly under a constant request load loses no
// request: listeners stay open and routes swap atomically.
func TestReloadUnderLoadZeroFailures(t *testing.T) {
	tn := tailnettest.New(t)
	cert := newTestCert(t, "app.example.com")
	a, b := echoBackend(t, "a"), echoBackend(t, "b")
	cfg := newConfig(tn, "reload-proxy", config.RoleIngressL7)
	cfg.L7 = &config.L7{TLS: cert.files(t), Rules: []config.Rule{{Host: "app.example.com", Paths: []config.Path{
		{Path: "/", Backend: backendOf("a", a)}}}}}
	r := start(t, tn, cfg, Options{})
	c := r.httpsClient(cert.roots)
	testpoll.Until(t, 20*time.Second, "first request", func() error { _, _, err := get(c, "https://app.example.com/", nil); return err })

	var ok, failed atomic.Int64
	var seen sync.Map
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				resp, _, err := get(c, "https://app.example.com/x", nil)
				if err != nil || resp.StatusCode != http.StatusOK {
					failed.Add(1)
					t.Logf("failed request: %v %v", err, resp)
					continue
				}
				seen.Store(resp.Header.Get("X-Backend"), true)
				ok.Add(1)
			}
		}()
	}
	applied := func() float64 { return gaugeValue(t, r.engine, "tailplane_proxy_config_reloads_total", "applied") }
	for i := range 10 {
		backend := backendOf("a", a)
		if i%2 == 0 {
			backend = backendOf("b", b)
		}
		cfg.L7.Rules[0].Paths[0].Backend = backend
		cfg.L7.HTTPRedirect = i%3 == 0 // also opens and closes the :80 listener
		before := applied()
		writeConfig(t, r.cfgPath, cfg)
		testpoll.Until(t, 5*time.Second, fmt.Sprintf("reload %d applied", i), func() error {
			if applied() <= before {
				return fmt.Errorf("not applied yet")
			}
			return nil
		})
		// Let some requests run on this config before the next reload.
		target := ok.Load() + 20
		testpoll.Until(t, 10*time.Second, "requests on the new config", func() error {
			if ok.Load() < target {
				return fmt.Errorf("%d requests so far", ok.Load())
			}
			return nil
		})
	}
	close(stop)
	wg.Wait()
	_, sawA := seen.Load("a")
	_, sawB := seen.Load("b")
	t.Logf("%d requests, %d failed, across 10 reloads", ok.Load(), failed.Load())
	if failed.Load() != 0 || !sawA || !sawB {
		t.Fatalf("%d failed requests (want 0); saw a=%v b=%v", failed.Load(), sawA, sawB)
	}
}

// SIGTERM (the end of Run's context) drains: new connections are refused,
// the in-flight request completes, then Run returns.
func TestShutdownDrainsInFlight(t *testing.T) {
	tn := tailnettest.New(t)
	cert := newTestCert(t, "app.example.com")
	started, release := make(chan struct{}, 1), make(chan struct{})
	slow := echoBackend(t, "slow")
	slow.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			started <- struct{}{}
			<-release
		}
		w.Write([]byte("done"))
	})
	cfg := newConfig(tn, "drain-proxy", config.RoleIngressL7)
	b := backendOf("slow", slow)
	cfg.L7 = &config.L7{TLS: cert.files(t), DefaultBackend: &b}
	r := start(t, tn, cfg, Options{DrainTimeout: 20 * time.Second})
	c := r.httpsClient(cert.roots)
	testpoll.Until(t, 20*time.Second, "first request", func() error { _, _, err := get(c, "https://app.example.com/", nil); return err })

	type result struct {
		status int
		body   string
		err    error
	}
	inflight := make(chan result, 1)
	go func() {
		resp, body, err := get(c, "https://app.example.com/slow", nil)
		if err != nil {
			inflight <- result{err: err}
			return
		}
		inflight <- result{status: resp.StatusCode, body: string(body)}
	}()
	<-started
	r.cancel() // what SIGTERM does in cmd/tailplane-proxy
	fresh := r.httpsClient(cert.roots)
	fresh.Timeout = 2 * time.Second
	testpoll.Until(t, 10*time.Second, "new connections refused", func() error {
		if _, _, err := get(fresh, "https://app.example.com/", nil); err == nil {
			return fmt.Errorf("a new connection was still served")
		}
		return nil
	})
	select {
	case <-r.done:
		t.Fatal("Run returned before the in-flight request finished")
	default:
	}
	close(release)
	res := <-inflight
	if res.err != nil || res.status != http.StatusOK || res.body != "done" {
		t.Fatalf("in-flight request: %+v, want 200 done", res)
	}
	select {
	case <-r.done:
	case <-time.After(20 * time.Second):
		t.Fatal("Run did not return after the drain")
	}
	if r.runErr != nil {
		t.Fatalf("Run: %v", r.runErr)
	}
	_ = context.Background
}

// A live role change (L4 on :80 to L7 plain HTTP on :80) and a switch of
// port 80 from redirect to plain HTTP both apply without restart.
func TestRoleAndPort80Changes(t *testing.T) {
	tn := tailnettest.New(t)
	cert := newTestCert(t, "app.example.com")
	web := echoBackend(t, "web")
	cfg := newConfig(tn, "role-proxy", config.RoleIngressL4)
	cfg.L4 = &config.L4{Ports: []config.PortMap{{Port: 80, Target: web.Listener.Addr().String()}}}
	r := start(t, tn, cfg, Options{})
	plain := r.plainClient()
	// As L4, port 80 reaches the backend as raw TCP: HTTP still works, with no redirect.
	testpoll.Until(t, 20*time.Second, "l4 :80", func() error {
		resp, _, err := get(plain, "http://app.example.com/", nil)
		if err != nil || resp.Header.Get("X-Backend") != "web" {
			return fmt.Errorf("%v %v", err, resp)
		}
		return nil
	})
	cfg.Role, cfg.L4 = config.RoleIngressL7, nil
	b := backendOf("web", web)
	cfg.L7 = &config.L7{TLS: cert.files(t), HTTPRedirect: true, DefaultBackend: &b}
	writeConfig(t, r.cfgPath, cfg)
	testpoll.Until(t, 10*time.Second, "redirect on :80", func() error {
		resp, _, err := get(plain, "http://app.example.com/x", nil)
		if err != nil || resp.StatusCode != http.StatusMovedPermanently {
			return fmt.Errorf("%v %v", err, resp)
		}
		return nil
	})
	cfg.L7.HTTPRedirect, cfg.L7.PlainHTTP = false, true
	writeConfig(t, r.cfgPath, cfg)
	testpoll.Until(t, 10*time.Second, "plain HTTP on :80", func() error {
		resp, _, err := get(plain, "http://app.example.com/x", nil)
		if err != nil || resp.StatusCode != http.StatusOK || resp.Header.Get("X-Backend") != "web" {
			return fmt.Errorf("%v %v", err, resp)
		}
		return nil
	})
}

// PluginRouters receives the config's plugins on every apply; its routers
// run after the table; its error refuses the config.
func TestPluginRoutersPerConfig(t *testing.T) {
	tn := tailnettest.New(t)
	cert := newTestCert(t, "app.example.com")
	web := echoBackend(t, "web")
	cfg := newConfig(tn, "plugin-proxy", config.RoleIngressL7)
	b := backendOf("web", web)
	cfg.L7 = &config.L7{TLS: cert.files(t), DefaultBackend: &b}
	cfg.Plugins = []config.Plugin{{Name: "v1"}}
	plugins := func(_ context.Context, ps []config.Plugin) ([]route.Router, error) {
		var out []route.Router
		for _, p := range ps {
			if p.Name == "broken" {
				return nil, fmt.Errorf("plugin %q failed to load", p.Name)
			}
			out = append(out, route.RouterFunc(func(_ context.Context, _ *route.Request, d route.Decision) (route.Decision, error) {
				d.SetResponseHeaders = http.Header{"X-Plugin": {p.Name}}
				return d, nil
			}))
		}
		return out, nil
	}
	r := start(t, tn, cfg, Options{PluginRouters: plugins})
	c := r.httpsClient(cert.roots)
	pluginIs := func(want string) func() error {
		return func() error {
			resp, _, err := get(c, "https://app.example.com/", nil)
			if err != nil {
				return err
			}
			if got := resp.Header.Get("X-Plugin"); got != want {
				return fmt.Errorf("X-Plugin %q, want %q", got, want)
			}
			return nil
		}
	}
	testpoll.Until(t, 20*time.Second, "plugin v1", pluginIs("v1"))
	cfg.Plugins = []config.Plugin{{Name: "v2"}}
	writeConfig(t, r.cfgPath, cfg)
	testpoll.Until(t, 5*time.Second, "plugin v2", pluginIs("v2"))
	refused := gaugeValue(t, r.engine, "tailplane_proxy_config_reloads_total", "refused")
	cfg.Plugins = []config.Plugin{{Name: "broken"}}
	writeConfig(t, r.cfgPath, cfg)
	testpoll.Until(t, 5*time.Second, "broken plugin refused", func() error {
		if gaugeValue(t, r.engine, "tailplane_proxy_config_reloads_total", "refused") <= refused {
			return fmt.Errorf("not refused yet")
		}
		return nil
	})
	if err := pluginIs("v2")(); err != nil {
		t.Fatalf("after the refused config: %v", err)
	}
}
