package bench_test

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"tailscale.com/ipn/store/mem"

	"github.com/tailplane/tailplane/internal/tailnettest"
	"github.com/tailplane/tailplane/proxy"
	"github.com/tailplane/tailplane/proxy/config"
	"github.com/tailplane/tailplane/proxy/configwatch"
	"github.com/tailplane/tailplane/proxy/route"
)

// BenchmarkTsnetProxy: requests/s through the whole tailplane-proxy (tsnet
// userspace WireGuard over a loopback tailnet, L7 on port 80, reverse proxy
// to a loopback backend), with and without a plugin in ExtraRouters.
func BenchmarkTsnetProxy(b *testing.B) {
	tn := tailnettest.New(b)
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "ok")
	}))
	defer backend.Close()
	addr := strings.TrimPrefix(backend.URL, "http://")
	cfg := `{"header":"X-Canary","headerValue":"always","backend":"web"}`
	client := tn.Node(b, "bench-client")
	variants := []struct {
		name  string
		extra func(testing.TB) route.Router
	}{{"no-plugin", nil}}
	for _, g := range guests() {
		if strings.HasSuffix(g.name, "nodeadline") {
			continue
		}
		variants = append(variants, struct {
			name  string
			extra func(testing.TB) route.Router
		}{g.name, func(tb testing.TB) route.Router { return loadGuest(tb, g, 16, cfg) }})
	}
	var servers []variant
	for i, v := range variants {
		hostname := "bench-proxy-" + itoa(i)
		var extra []route.Router
		if v.extra != nil {
			extra = append(extra, v.extra(b))
		}
		engine := startProxy(b, tn, hostname, addr, extra)
		ip4, _ := engine.Node().TailscaleIPs()
		target := net.JoinHostPort(ip4.String(), "80")
		c := &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{
			MaxIdleConnsPerHost: 64,
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				return client.Dial(ctx, "tcp", target)
			}}}
		s := variant{v.name, c, "http://" + tailnettest.FQDN(hostname) + "/api/items"}
		deadline := time.Now().Add(60 * time.Second)
		for err := s.get(); err != nil; err = s.get() {
			if time.Now().After(deadline) {
				b.Fatalf("proxy %s not serving: %v", v.name, err)
			}
		}
		servers = append(servers, s)
	}
	interleave(b, servers)
}

type statusError struct{ code int }

func (e *statusError) Error() string { return "status " + itoa(e.code) }

func startProxy(b *testing.B, tn *tailnettest.Tailnet, hostname, backend string, extra []route.Router) *proxy.Engine {
	b.Helper()
	cfg := &config.Config{Version: config.Version, Hostname: hostname, Role: config.RoleIngressL7, LoginServer: tn.ControlURL, AuthKey: tn.AuthKey,
		L7: &config.L7{PlainHTTP: true, DefaultBackend: &config.Backend{Service: "web", Address: backend}}}
	dir := b.TempDir()
	path := filepath.Join(dir, "config.json")
	raw, err := json.Marshal(cfg)
	if err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(path, raw, 0o600); err != nil {
		b.Fatal(err)
	}
	e, err := proxy.New(proxy.Options{
		Source: &configwatch.File{Path: path, Interval: 100 * time.Millisecond, Log: quiet()},
		State:  new(mem.Store), Ephemeral: true, StateDir: filepath.Join(dir, "state"),
		EgressHost: "127.0.0.1", ExtraRouters: extra, Logger: quiet(),
	})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = e.Run(ctx); close(done) }()
	b.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			b.Error("proxy did not stop")
		}
	})
	deadline := time.Now().Add(60 * time.Second)
	for !e.Ready() {
		if time.Now().After(deadline) {
			b.Fatal("proxy not ready after 60s")
		}
		<-time.After(25 * time.Millisecond)
	}
	wctx, wcancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer wcancel()
	if err := tailnettest.WaitDERP(wctx, e.Node()); err != nil {
		b.Fatal(err)
	}
	return e
}
