package proxy

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/tailplane/tailplane/internal/tailnettest"
	"github.com/tailplane/tailplane/internal/testpoll"
	"github.com/tailplane/tailplane/proxy/config"
	"github.com/tailplane/tailplane/proxy/l7"
	"github.com/tailplane/tailplane/proxy/route"
	"github.com/tailplane/tailplane/proxy/routetable"
)

// L7 over the tailnet: TLS with a test certificate, HTTP/2, host/wildcard/
// path routing, default backend, identity headers set from WhoIs with
// spoofed copies stripped, X-Forwarded-*, extra routers in the chain, and
// the :80 redirect.
func TestL7RoutingTLSIdentity(t *testing.T) {
	tn := tailnettest.New(t, tailnettest.WithAuthKey("tskey-l7"))
	api, web, def, canary := echoBackend(t, "api"), echoBackend(t, "web"), echoBackend(t, "default"), echoBackend(t, "canary")
	cert := newTestCert(t, "app.example.com", "*.example.com", "other.example.org")
	cfg := newConfig(tn, "web-proxy", config.RoleIngressL7)
	defBackend := backendOf("default", def)
	cfg.L7 = &config.L7{TLS: cert.files(t), HTTPRedirect: true, DefaultBackend: &defBackend, Rules: []config.Rule{
		{Host: "app.example.com", Paths: []config.Path{
			{Path: "/api", PathType: config.PathPrefix, Backend: backendOf("api", api)},
			{Path: "/", PathType: config.PathExact, Backend: backendOf("web", web)},
		}},
		{Host: "*.example.com", Paths: []config.Path{{Path: "/", Backend: backendOf("web", web)}}},
	}, ExtraBackends: []config.Backend{backendOf("canary", canary)}}
	// An extra router after the table: proves the chain runs and sees the table's decision.
	extra := route.RouterFunc(func(_ context.Context, req *route.Request, prev route.Decision) (route.Decision, error) {
		switch req.Path {
		case "/api/blocked":
			return route.Decision{Action: route.Deny, Status: http.StatusTeapot, Body: "blocked by plugin"}, nil
		case "/api/answered":
			return route.Decision{Action: route.Deny, Status: http.StatusOK, Body: "answered by plugin"}, nil
		case "/api/odd-status":
			return route.Decision{Action: route.Deny, Status: 99, Body: "odd"}, nil
		case "/api/rewrite":
			prev.RewriteURI, prev.Method = "/v2/users%2Fme?x=1", http.MethodPut
		case "/api/canary":
			// The extra backend is on every route's allowlist, after the route's own.
			if len(req.Route.Backends) != 2 || req.Route.Backends[1].Name != "canary" {
				return prev, fmt.Errorf("route backends %+v, want api then the extra canary", req.Route.Backends)
			}
			prev.Backend = &req.Route.Backends[1]
		}
		prev.SetResponseHeaders = http.Header{"X-Chain": {"saw-" + prev.Backend.Name}, "X-Backend": {"router-" + prev.Backend.Name}}
		// A router must not be able to forge what the proxy vouches for.
		prev.SetRequestHeaders = http.Header{l7.HeaderUserLogin: {"plugin@example.com"}, l7.HeaderFunnelRequest: {"?1"}, "Tailscale-App-Capabilities": {"{}"}}
		return prev, nil
	})
	r := start(t, tn, cfg, Options{ExtraRouters: []route.Router{extra}})
	c := r.httpsClient(cert.roots)

	// Every Tailscale-* header a client sends is dropped, whatever its case.
	spoof := http.Header{l7.HeaderUserLogin: {"evil@example.com"}, l7.HeaderUserName: {"Evil"}, l7.HeaderUserProfilePic: {"http://evil"},
		l7.HeaderFunnelRequest: {"?1"}, l7.HeaderHeadersInfo: {"http://evil"}, "Tailscale-App-Capabilities": {`{"evil":[]}`},
		"tailscale-ingress-src": {"1.2.3.4:5"}}
	cases := []struct{ url, backend, path string }{
		{"https://app.example.com/api/users", "api", "/api/users"},
		{"https://app.example.com/", "web", "/"},
		{"https://app.example.com/other", "web", "/other"}, // Exact "/" misses; the wildcard rule catches it
		{"https://x.example.com/deep/path", "web", "/deep/path"},
		{"https://other.example.org/", "default", "/"},
	}
	for _, tc := range cases {
		var resp *http.Response
		var body []byte
		testpoll.Until(t, 20*time.Second, "GET "+tc.url, func() (err error) { resp, body, err = get(c, tc.url, spoof); return err })
		var e echoed
		if err := json.Unmarshal(body, &e); err != nil {
			t.Fatalf("%s: status %d body %q", tc.url, resp.StatusCode, body)
		}
		if e.Backend != tc.backend || e.Path != tc.path {
			t.Errorf("%s went to %s%s, want %s%s", tc.url, e.Backend, e.Path, tc.backend, tc.path)
		}
		if resp.ProtoMajor != 2 {
			t.Errorf("%s: protocol %s, want HTTP/2", tc.url, resp.Proto)
		}
		if got := resp.Header.Get("X-Chain"); got != "saw-"+tc.backend {
			t.Errorf("%s: X-Chain %q, want saw-%s (extra router not run after the table)", tc.url, got, tc.backend)
		}
		// Values holds one entry per header line (HTTP/1.1) or field
		// (HTTP/2) received: a router's header must arrive once, replacing
		// the backend's own X-Backend rather than joining it.
		if got := resp.Header.Values("X-Chain"); len(got) != 1 {
			t.Errorf("%s: X-Chain arrived as %d header lines %q, want 1", tc.url, len(got), got)
		}
		if got := resp.Header.Values("X-Backend"); len(got) != 1 || got[0] != "router-"+tc.backend {
			t.Errorf("%s: X-Backend lines %q, want only the router's router-%s", tc.url, got, tc.backend)
		}
		login := e.Header.Get(l7.HeaderUserLogin)
		if login == "" || login == "evil@example.com" || e.Header.Get(l7.HeaderUserName) == "Evil" ||
			len(e.Header.Values(l7.HeaderUserLogin)) != 1 || e.Header.Get(l7.HeaderUserProfilePic) == "http://evil" {
			t.Errorf("%s: identity headers wrong (spoofed copies must go, real ones must be set): %v", tc.url, e.Header)
		}
		if got := e.Header.Values(l7.HeaderHeadersInfo); len(got) != 1 || got[0] != "https://tailscale.com/s/serve-headers" {
			t.Errorf("%s: %s %q, want the proxy's one link", tc.url, l7.HeaderHeadersInfo, got)
		}
		for k := range e.Header {
			if k == l7.HeaderFunnelRequest || strings.EqualFold(k, "Tailscale-App-Capabilities") || strings.EqualFold(k, "Tailscale-Ingress-Src") {
				t.Errorf("%s: a client's or router's %s reached the backend over the tailnet: %v", tc.url, k, e.Header)
			}
		}
		if e.Header.Get("X-Forwarded-Proto") != "https" || e.Header.Get("X-Forwarded-For") == "" || e.Header.Get("X-Forwarded-Host") == "" {
			t.Errorf("%s: X-Forwarded-* missing: %v", tc.url, e.Header)
		}
		if e.Host != strings.TrimPrefix(strings.Split(tc.url, "/")[2], "") {
			t.Errorf("%s: backend saw Host %q", tc.url, e.Host)
		}
	}
	// The identity is the client's own tailnet login.
	lc, _ := r.client.LocalClient()
	st, err := lc.Status(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	wantLogin := st.User[st.Self.UserID].LoginName
	_, body, err := get(c, "https://app.example.com/api/me", nil)
	if err != nil {
		t.Fatal(err)
	}
	var e echoed
	_ = json.Unmarshal(body, &e)
	if e.Header.Get(l7.HeaderUserLogin) != wantLogin {
		t.Errorf("login header %q, want the caller's %q", e.Header.Get(l7.HeaderUserLogin), wantLogin)
	}

	resp, body, err := get(c, "https://app.example.com/api/blocked", nil)
	if err != nil || resp.StatusCode != http.StatusTeapot || !strings.Contains(string(body), "blocked by plugin") {
		t.Errorf("extra router deny: %v %v %q", err, resp, body)
	}

	// A router's local answer keeps its status when it is 2xx, 4xx or 5xx;
	// anything else is 403.
	resp, body, err = get(c, "https://app.example.com/api/answered", nil)
	if err != nil || resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "answered by plugin") {
		t.Errorf("local 200 answer: %v %v %q", err, resp, body)
	}
	resp, _, err = get(c, "https://app.example.com/api/odd-status", nil)
	if err != nil || resp.StatusCode != http.StatusForbidden {
		t.Errorf("local answer with status 99: %v %v, want 403", err, resp)
	}
	// RewriteURI and Method reach the backend.
	_, body, err = get(c, "https://app.example.com/api/rewrite?orig=1", nil)
	e = echoed{}
	if err != nil || json.Unmarshal(body, &e) != nil || e.Backend != "api" || e.Method != http.MethodPut || e.Path != "/v2/users/me" || e.Query != "x=1" {
		t.Errorf("rewritten request reached the backend as %+v (%v); want PUT /v2/users%%2Fme?x=1 on api", e, err)
	}
	// A router may pick the config's extra backend.
	_, body, err = get(c, "https://app.example.com/api/canary", nil)
	e = echoed{}
	if err != nil || json.Unmarshal(body, &e) != nil || e.Backend != "canary" || e.Path != "/api/canary" {
		t.Errorf("extra backend: %+v %v %q", e, err, body)
	}

	resp, _, err = get(r.plainClient(), "http://app.example.com/some/page?q=1", nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusMovedPermanently || resp.Header.Get("Location") != "https://app.example.com/some/page?q=1" {
		t.Errorf("redirect: %d Location %q", resp.StatusCode, resp.Header.Get("Location"))
	}
}

// Without a default backend an unmatched request is 404; a dead backend is
// a quick 502 with a short body.
func TestL7NotFoundAndBackendDown(t *testing.T) {
	tn := tailnettest.New(t)
	cert := newTestCert(t, "app.example.com")
	dead, _ := net.Listen("tcp", "127.0.0.1:0")
	deadAddr := dead.Addr().String()
	dead.Close()
	cfg := newConfig(tn, "nf-proxy", config.RoleIngressL7)
	cfg.L7 = &config.L7{TLS: cert.files(t), Rules: []config.Rule{{Host: "app.example.com", Paths: []config.Path{
		{Path: "/down", Backend: config.Backend{Service: "down", Address: deadAddr}}}}}}
	r := start(t, tn, cfg, Options{})
	c := r.httpsClient(cert.roots)
	var resp *http.Response
	var body []byte
	testpoll.Until(t, 20*time.Second, "404", func() (err error) { resp, body, err = get(c, "https://app.example.com/nothing", nil); return err })
	if resp.StatusCode != http.StatusNotFound || string(body) != routetable.NotFoundBody+"\n" {
		t.Errorf("unmatched: %d %q, want 404 %q", resp.StatusCode, body, routetable.NotFoundBody)
	}
	started := time.Now()
	resp, body, err := get(c, "https://app.example.com/down", nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusBadGateway || !strings.Contains(string(body), "upstream unavailable") || len(body) > 64 {
		t.Errorf("dead backend: %d %q, want a short 502", resp.StatusCode, body)
	}
	if time.Since(started) > 5*time.Second {
		t.Errorf("502 took %v", time.Since(started))
	}
}

// A WebSocket upgrade passes through the proxy and echoes.
func TestL7WebSocketEcho(t *testing.T) {
	tn := tailnettest.New(t)
	cert := newTestCert(t, "ws.example.com")
	backend := echoWS(t)
	cfg := newConfig(tn, "ws-proxy", config.RoleIngressL7)
	cfg.L7 = &config.L7{TLS: cert.files(t), DefaultBackend: &config.Backend{Service: "ws", Address: backend}}
	r := start(t, tn, cfg, Options{})
	// WebSockets ride HTTP/1.1 upgrades.
	c := r.httpsClient(cert.roots)
	c.Transport.(*http.Transport).ForceAttemptHTTP2 = false
	c.Transport.(*http.Transport).TLSClientConfig = &tls.Config{RootCAs: cert.roots, NextProtos: []string{"http/1.1"}}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	conn, _, err := websocket.Dial(ctx, "wss://ws.example.com/echo", &websocket.DialOptions{HTTPClient: c})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.CloseNow()
	for _, msg := range []string{"hello", "over the tailnet"} {
		if err := conn.Write(ctx, websocket.MessageText, []byte(msg)); err != nil {
			t.Fatal(err)
		}
		_, got, err := conn.Read(ctx)
		if err != nil || string(got) != msg {
			t.Fatalf("echo %q: got %q, %v", msg, got, err)
		}
	}
}

func echoWS(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		defer conn.CloseNow()
		for {
			typ, msg, err := conn.Read(r.Context())
			if err != nil {
				return
			}
			if err := conn.Write(r.Context(), typ, msg); err != nil {
				return
			}
		}
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String()
}

// Funnel where control has none: the public listen address serves the
// same routes, marks requests public (no identity headers) and honours a
// router's DenyPublic.
func TestL7PublicListener(t *testing.T) {
	tn := tailnettest.New(t)
	cert := newTestCert(t, "pub.example.com")
	backend := echoBackend(t, "pub")
	cfg := newConfig(tn, "pub-proxy", config.RoleIngressL7)
	b := backendOf("pub", backend)
	cfg.L7 = &config.L7{TLS: cert.files(t), Funnel: true, DefaultBackend: &b}
	pub, _ := net.Listen("tcp", "127.0.0.1:0")
	pubAddr := pub.Addr().String()
	pub.Close()
	var sawPublic, sawPrivate atomic.Bool
	narrow := route.RouterFunc(func(_ context.Context, req *route.Request, prev route.Decision) (route.Decision, error) {
		if req.Public {
			sawPublic.Store(true)
		} else {
			sawPrivate.Store(true)
		}
		prev.DenyPublic = req.Path == "/private"
		prev.SetRequestHeaders = http.Header{l7.HeaderFunnelRequest: {"?0"}, l7.HeaderUserLogin: {"plugin@example.com"}}
		return prev, nil
	})
	r := start(t, tn, cfg, Options{PublicAddr: pubAddr, ExtraRouters: []route.Router{narrow}})
	_ = r
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "tcp", pubAddr)
		},
		TLSClientConfig: &tls.Config{RootCAs: cert.roots}}}
	var resp *http.Response
	var body []byte
	testpoll.Until(t, 10*time.Second, "public GET", func() (err error) {
		resp, body, err = get(c, "https://pub.example.com/open", http.Header{l7.HeaderUserLogin: {"spoof@x"}, l7.HeaderFunnelRequest: {"?0"}, l7.HeaderHeadersInfo: {"x"}})
		return err
	})
	var e echoed
	if err := json.Unmarshal(body, &e); err != nil || e.Backend != "pub" {
		t.Fatalf("public request: %d %q", resp.StatusCode, body)
	}
	if e.Header.Get(l7.HeaderUserLogin) != "" || e.Header.Get(l7.HeaderHeadersInfo) != "" {
		t.Errorf("public request carried an identity header: %v", e.Header)
	}
	// The Funnel marker, as tailscale serve sets it: the proxy's alone,
	// whatever the client or a router sent.
	if got := e.Header.Values(l7.HeaderFunnelRequest); len(got) != 1 || got[0] != "?1" {
		t.Errorf("public request: %s %q, want exactly ?1", l7.HeaderFunnelRequest, got)
	}
	resp, _, err := get(c, "https://pub.example.com/private", nil)
	if err != nil || resp.StatusCode != http.StatusForbidden {
		t.Errorf("DenyPublic: %v %v, want 403", err, resp)
	}
	if !sawPublic.Load() || sawPrivate.Load() {
		t.Errorf("router saw public=%v private=%v, want only public requests", sawPublic.Load(), sawPrivate.Load())
	}
}

// Responses stream: the client reads the first chunk while the backend is
// still holding back the rest.
func TestL7Streaming(t *testing.T) {
	tn := tailnettest.New(t)
	cert := newTestCert(t, "stream.example.com")
	proceed := make(chan struct{})
	backend := echoBackend(t, "stream")
	backend.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("first;"))
		w.(http.Flusher).Flush()
		select {
		case <-proceed:
		case <-r.Context().Done():
			return
		}
		w.Write([]byte("second"))
	})
	cfg := newConfig(tn, "stream-proxy", config.RoleIngressL7)
	b := backendOf("stream", backend)
	cfg.L7 = &config.L7{TLS: cert.files(t), DefaultBackend: &b}
	r := start(t, tn, cfg, Options{})
	c := r.httpsClient(cert.roots)
	var resp *http.Response
	testpoll.Until(t, 20*time.Second, "stream start", func() (err error) {
		resp, err = c.Get("https://stream.example.com/")
		return err
	})
	defer resp.Body.Close()
	buf := make([]byte, len("first;"))
	if _, err := io.ReadFull(resp.Body, buf); err != nil || string(buf) != "first;" {
		t.Fatalf("first chunk: %q %v", buf, err)
	}
	close(proceed)
	rest, err := io.ReadAll(resp.Body)
	if err != nil || string(rest) != "second" {
		t.Fatalf("rest: %q %v", rest, err)
	}
}
