package l7

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/log"

	"github.com/tailplane/tailplane/proxy/metrics"
	"github.com/tailplane/tailplane/proxy/route"
)

// matchAll puts every request on one route with the given backends.
type matchAll struct{ rt *route.Route }

func (m matchAll) MatchRequest(*http.Request) *route.Route { return m.rt }

// handlerWith serves every request with decide's decision; decide also
// fills the route's backends. h2c lists the backends spoken to in h2c.
func handlerWith(decide func(rt *route.Route) route.Decision, h2c ...string) http.Handler {
	rt := &route.Route{Name: "ns/r/0"}
	h := NewHandler(nil, NewTransport(), metrics.New(), log.New(io.Discard))
	routes := &Routes{Table: matchAll{rt}, H2CBackends: map[string]bool{},
		Routers: Chain{route.RouterFunc(func(_ context.Context, req *route.Request, _ route.Decision) (route.Decision, error) {
			return decide(req.Route), nil
		})}}
	for _, a := range h2c {
		routes.H2CBackends[a] = true
	}
	h.SetRoutes(routes)
	return h.Listener(false)
}

func backendFor(srv *httptest.Server, name string) route.Backend {
	return route.Backend{Name: name, Address: srv.Listener.Addr().String()}
}

// What the gateway table's filters ask of the handler: the Host rewrite,
// response headers added and removed, mirrors with the request body, a
// timeout answered 504, and HTTP/2 without TLS to h2c backends.
func TestGatewayDecisionFields(t *testing.T) {
	mirrored := make(chan string, 1)
	mirror := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mirrored <- r.Method + " " + r.Host + r.URL.Path + " " + string(b)
		w.WriteHeader(http.StatusTeapot) // dropped
	}))
	defer mirror.Close()
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			select {
			case <-r.Context().Done():
			case <-time.After(5 * time.Second):
			}
			return
		}
		b, _ := io.ReadAll(r.Body)
		w.Header().Set("Server", "backend")
		w.Header().Set("X-Add", "backend")
		io.WriteString(w, r.Host+" "+r.Proto+" "+string(b))
	}))
	defer backend.Close()
	h2cBackend := httptest.NewUnstartedServer(backend.Config.Handler)
	h2cBackend.Config.Protocols = new(http.Protocols)
	h2cBackend.Config.Protocols.SetUnencryptedHTTP2(true)
	h2cBackend.Start()
	defer h2cBackend.Close()

	h := handlerWith(func(r *route.Route) route.Decision {
		r.Backends = []route.Backend{backendFor(backend, "b")}
		return route.Decision{Action: route.Forward, Backend: &r.Backends[0], Host: "internal.example",
			AddResponseHeaders: http.Header{"X-Add": {"gateway"}}, RemoveResponseHeaders: []string{"Server"},
			Mirrors: []route.Backend{backendFor(mirror, "m")}, Timeout: 300 * time.Millisecond}
	})

	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("POST", "http://app.example.com/x", strings.NewReader("payload")))
	if got := rec.Body.String(); got != "internal.example HTTP/1.1 payload" {
		t.Errorf("backend answered %q, want the rewritten Host and the body", got)
	}
	if got := rec.Header().Values("X-Add"); strings.Join(got, ",") != "backend,gateway" {
		t.Errorf("X-Add %q, want the gateway's value appended to the backend's", got)
	}
	if got := rec.Header().Get("Server"); got != "" {
		t.Errorf("Server %q reached the client; the filter removes it", got)
	}
	select {
	case got := <-mirrored:
		if got != "POST internal.example/x payload" {
			t.Errorf("mirror got %q", got)
		}
	case <-time.After(10 * time.Second):
		t.Error("the mirror got no copy")
	}

	rec = httptest.NewRecorder()
	start := time.Now()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "http://app.example.com/slow", nil))
	if rec.Code != http.StatusGatewayTimeout || rec.Body.String() != TimeoutBody+"\n" || time.Since(start) > 3*time.Second {
		t.Errorf("slow backend: %d %q after %v, want 504 %q after the 300ms timeout", rec.Code, rec.Body, time.Since(start), TimeoutBody)
	}
	if got := rec.Header().Values("X-Add"); strings.Join(got, ",") != "gateway" {
		t.Errorf("504's X-Add %q, want the gateway's value on the proxy's own answer", got)
	}

	h2 := handlerWith(func(r *route.Route) route.Decision {
		r.Backends = []route.Backend{backendFor(h2cBackend, "h2c")}
		return route.Decision{Action: route.Forward, Backend: &r.Backends[0]}
	}, h2cBackend.Listener.Addr().String())
	rec = httptest.NewRecorder()
	h2.ServeHTTP(rec, httptest.NewRequest("GET", "http://app.example.com/", nil))
	if got := rec.Body.String(); !strings.Contains(got, "HTTP/2.0") {
		t.Errorf("h2c backend answered %d %q, want the request over HTTP/2", rec.Code, got)
	}
}
