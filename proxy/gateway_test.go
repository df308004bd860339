package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tailplane/tailplane/internal/tailnettest"
	"github.com/tailplane/tailplane/internal/testpoll"
	"github.com/tailplane/tailplane/proxy/config"
	"github.com/tailplane/tailplane/proxy/l7"
	"github.com/tailplane/tailplane/proxy/route"
)

// gatewayPort is the HTTP listener's port in these tests: not 80, so that
// redirects must carry it.
const gatewayHTTPPort = 8080

// weighted is a backend of weight 1.
func weighted(b config.Backend) []config.WeightedBackend {
	return []config.WeightedBackend{{Backend: b, Weight: 1}}
}

// portClient talks HTTP to the proxy's port over the tailnet, counting the
// connections it opens; h2c makes it speak HTTP/2 with prior knowledge.
func (r *running) portClient(port int, dials *atomic.Int32, h2c bool) *http.Client {
	tr := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		if dials != nil {
			dials.Add(1)
		}
		return r.client.Dial(ctx, "tcp", r.proxyAddr(port))
	}}
	if h2c {
		tr.Protocols = new(http.Protocols)
		tr.Protocols.SetUnencryptedHTTP2(true)
	}
	return &http.Client{Transport: tr, Timeout: 20 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// grpcBackend answers like a gRPC server: HTTP/2 only (h2c), a
// grpc-status trailer, and the protocol it saw in the body.
func grpcBackend(t *testing.T) *httptest.Server {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/grpc")
		w.Header().Set("Trailer", "Grpc-Status")
		in, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "%s %s %s", r.Proto, r.URL.Path, in)
		w.Header().Set("Grpc-Status", "0")
	}))
	srv.Config.Protocols = new(http.Protocols)
	srv.Config.Protocols.SetUnencryptedHTTP2(true)
	srv.Start()
	t.Cleanup(srv.Close)
	return srv
}

// A gateway's HTTP listener routes by host, path and header through the
// shared L7 handler (identity headers as on Ingress, metrics by rule
// name), redirects with the listener's port, answers a slow backend's
// timeout with 504, answers an invalid backend's share with 500, passes gRPC from an h2c client to an h2c backend, and
// a reload changes the routes on the connection already open.
func TestGatewayHTTPListener(t *testing.T) {
	tn := tailnettest.New(t, tailnettest.WithAuthKey("tskey-gw"))
	api, web, canary := echoBackend(t, "api"), echoBackend(t, "web"), echoBackend(t, "canary")
	grpc := grpcBackend(t)
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(10 * time.Second):
		}
	}))
	t.Cleanup(slow.Close)
	grpcBE := backendOf("grpc", grpc)
	grpcBE.H2C = true
	routes := func(apiTo config.Backend) []config.HTTPRoute {
		return []config.HTTPRoute{
			{Name: "ns/canary/0", Hostnames: []string{"app.example.com"}, Backends: weighted(backendOf("canary", canary)),
				Match: config.HTTPMatch{Headers: []config.ValueMatch{{Name: "x-env", Value: "canary"}}}},
			{Name: "ns/api/0", Hostnames: []string{"app.example.com"}, Backends: weighted(apiTo),
				Match:   config.HTTPMatch{PathType: config.MatchPathPrefix, Path: "/api"},
				Plugins: []config.Plugin{{Name: "ns/tagger"}}},
			{Name: "ns/grpc/0", Hostnames: []string{"grpc.example.com"}, Backends: weighted(grpcBE),
				Match: config.HTTPMatch{PathType: config.MatchExact, Path: "/pkg.Svc/Get", Method: "POST"}},
			{Name: "ns/old/0", Match: config.HTTPMatch{PathType: config.MatchPathPrefix, Path: "/old"},
				Filters: config.HTTPFilters{Redirect: &config.Redirect{Hostname: "new.example.com",
					Path: &config.PathModifier{Type: config.ReplacePrefixMatch, Value: "/new"}}}},
			{Name: "ns/slow/0", Match: config.HTTPMatch{PathType: config.MatchPathPrefix, Path: "/slow"},
				Backends: weighted(backendOf("slow", slow)), RequestTimeoutMillis: 300},
			{Name: "ns/split/0", Match: config.HTTPMatch{PathType: config.MatchPathPrefix, Path: "/split"},
				Backends: []config.WeightedBackend{{Backend: backendOf("api", api), Weight: 1},
					{Backend: config.Backend{Service: "ns/gone:80"}, Weight: 1, Invalid: true}}},
			{Name: "ns/web/0", Backends: weighted(backendOf("web", web)),
				Filters: config.HTTPFilters{RequestHeaders: &config.HeaderModifier{Set: []config.Header{{Name: "X-Gateway", Value: "yes"}}}}},
		}
	}
	cfg := newConfig(tn, "gw-http", config.RoleGateway)
	cfg.Gateway = &config.Gateway{Listeners: []config.Listener{{Name: "http", Port: gatewayHTTPPort, Protocol: config.ListenerHTTP,
		HTTPRoutes: routes(backendOf("api", api))}}}
	// The rule's plugin runs after the table, for that rule only.
	plugins := func(_ context.Context, ps []config.Plugin) ([]route.Router, error) {
		var out []route.Router
		for _, p := range ps {
			out = append(out, route.RouterFunc(func(_ context.Context, _ *route.Request, prev route.Decision) (route.Decision, error) {
				prev.SetResponseHeaders = http.Header{"X-Plugin": {p.Name}}
				return prev, nil
			}))
		}
		return out, nil
	}
	r := start(t, tn, cfg, Options{PluginRouters: plugins})
	var dials atomic.Int32
	c := r.portClient(gatewayHTTPPort, &dials, false)
	url := func(host, path string) string { return fmt.Sprintf("http://%s:%d%s", host, gatewayHTTPPort, path) }

	spoof := http.Header{l7.HeaderUserLogin: {"evil@example.com"}, "Tailscale-App-Capabilities": {"{}"}}
	backendOfReq := func(u string, hdr http.Header) (echoed, *http.Response) {
		t.Helper()
		var resp *http.Response
		var body []byte
		testpoll.Until(t, 20*time.Second, "GET "+u, func() (err error) { resp, body, err = get(c, u, hdr); return err })
		var e echoed
		if resp.StatusCode == http.StatusOK {
			if err := json.Unmarshal(body, &e); err != nil {
				t.Fatalf("%s: %q: %v", u, body, err)
			}
		}
		return e, resp
	}
	for _, tc := range []struct {
		url     string
		hdr     http.Header
		backend string
	}{
		{url("app.example.com", "/api/users"), spoof, "api"},
		{url("app.example.com", "/api/users"), http.Header{"X-Env": {"canary"}}, "canary"},
		{url("app.example.com", "/apiary"), nil, "web"},
		{url("other.example.org", "/api/users"), nil, "web"},
	} {
		e, resp := backendOfReq(tc.url, tc.hdr)
		if e.Backend != tc.backend {
			t.Errorf("%s %v went to %q, want %s", tc.url, tc.hdr, e.Backend, tc.backend)
		}
		if got, want := resp.Header.Get("X-Plugin"), map[bool]string{true: "ns/tagger"}[tc.backend == "api"]; got != want {
			t.Errorf("%s %v: X-Plugin %q, want %q (the rule's plugin runs for its rule only)", tc.url, tc.hdr, got, want)
		}
		login := e.Header.Get(l7.HeaderUserLogin)
		if login == "" || login == "evil@example.com" || e.Header.Get("Tailscale-App-Capabilities") != "" {
			t.Errorf("%s: identity headers %v: a client's must go and the proxy's must be set", tc.url, e.Header)
		}
	}
	if e, _ := backendOfReq(url("x.example.com", "/"), nil); e.Header.Get("X-Gateway") != "yes" {
		t.Errorf("request header filter: backend saw %v", e.Header)
	}
	if got := gaugeValue(t, r.engine, "tailplane_proxy_requests_total", "ns/api/0"); got < 1 {
		t.Errorf("requests of ns/api/0 counted %v, want the rule's name as the route label", got)
	}

	_, resp := backendOfReq(url("app.example.com", "/old/page?q=1"), nil)
	if want := fmt.Sprintf("http://new.example.com:%d/new/page?q=1", gatewayHTTPPort); resp.StatusCode != http.StatusFound || resp.Header.Get("Location") != want {
		t.Errorf("redirect: %d %q, want 302 %q", resp.StatusCode, resp.Header.Get("Location"), want)
	}
	start := time.Now()
	if _, resp := backendOfReq(url("app.example.com", "/slow"), nil); resp.StatusCode != http.StatusGatewayTimeout || time.Since(start) > 5*time.Second {
		t.Errorf("slow backend: %d after %v, want 504 after the rule's 300ms", resp.StatusCode, time.Since(start))
	}

	// Half the split goes to api, the invalid backend's half is 500.
	codes := map[int]int{}
	for range 40 {
		resp, _, err := get(c, url("app.example.com", "/split"), nil)
		if err != nil {
			t.Fatal(err)
		}
		codes[resp.StatusCode]++
	}
	if codes[http.StatusOK] == 0 || codes[http.StatusInternalServerError] == 0 || codes[http.StatusOK]+codes[http.StatusInternalServerError] != 40 {
		t.Errorf("split with an invalid backend answered %v, want both 200 (api) and 500 (the invalid share)", codes)
	}

	// gRPC: HTTP/2 without TLS from the client, to an h2c backend.
	gc := r.portClient(gatewayHTTPPort, nil, true)
	req, _ := http.NewRequest("POST", url("grpc.example.com", "/pkg.Svc/Get"), bytes.NewReader([]byte("\x00\x00\x00\x00\x02hi")))
	req.Header.Set("Content-Type", "application/grpc")
	req.Header.Set("TE", "trailers")
	gresp, err := gc.Do(req)
	if err != nil {
		t.Fatalf("gRPC request: %v", err)
	}
	gbody, _ := io.ReadAll(gresp.Body)
	gresp.Body.Close()
	if gresp.ProtoMajor != 2 || !strings.HasPrefix(string(gbody), "HTTP/2.0 /pkg.Svc/Get") || gresp.Trailer.Get("Grpc-Status") != "0" {
		t.Errorf("gRPC: %s %d %q trailer %v; want HTTP/2 both ways and grpc-status 0", gresp.Proto, gresp.StatusCode, gbody, gresp.Trailer)
	}

	// A reload sends /api to web, on the keep-alive connection opened
	// before it: the listener was not reopened.
	before := dials.Load()
	cfg.Gateway.Listeners[0].HTTPRoutes = routes(backendOf("web", web))
	writeConfig(t, r.cfgPath, cfg)
	testpoll.Until(t, 20*time.Second, "/api moves to web", func() error {
		_, body, err := get(c, url("app.example.com", "/api/users"), nil)
		if err != nil {
			return err
		}
		if !strings.Contains(string(body), `"backend":"web"`) {
			return fmt.Errorf("still %s", body)
		}
		return nil
	})
	if after := dials.Load(); after != before {
		t.Errorf("the client dialled %d times during the reload, want 0: the listener dropped its connection", after-before)
	}
}
