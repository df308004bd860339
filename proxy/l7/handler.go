package l7

import (
	"context"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/charmbracelet/log"

	"github.com/tailplane/tailplane/proxy/metrics"
	"github.com/tailplane/tailplane/proxy/route"
	"github.com/tailplane/tailplane/proxy/routetable"
)

// WhoIsFunc returns the tailnet identity behind a remote address, or nil
// when it is not a tailnet peer.
type WhoIsFunc func(ctx context.Context, remoteAddr string) (*route.Identity, error)

// Matcher finds the routing-table entry of a request, nil when none fits:
// routetable.Table for Ingress, gatewaytable.Table for a Gateway's listener.
type Matcher interface {
	MatchRequest(r *http.Request) *route.Route
}

// Routes is the routing state of one config; the handler swaps it
// atomically, so a reload never drops a request.
type Routes struct {
	// Table matches the request and fills route.Request.Route.
	Table Matcher
	// Routers is the chain run on every request: the table first, then
	// extra routers (plugins) in order.
	Routers Chain
	// HTTPSBackends are backend addresses spoken to over TLS, and
	// H2CBackends those spoken to in HTTP/2 without TLS (gRPC).
	HTTPSBackends map[string]bool
	H2CBackends   map[string]bool
}

// Handler is the L7 request handler shared by all listeners.
type Handler struct {
	routes  atomic.Pointer[Routes]
	whois   WhoIsFunc
	metrics *metrics.Metrics
	log     *log.Logger
	proxy   *reverseProxy
}

// NewHandler returns a handler with no routes (every request gets 503 until
// SetRoutes is called). transport is shared by all backends; see
// NewTransport. Backends in Routes.H2CBackends are reached through an h2c
// transport of the handler's own (NewH2CTransport), which opens
// connections only when such a backend is used.
func NewHandler(whois WhoIsFunc, transport http.RoundTripper, m *metrics.Metrics, logger *log.Logger) *Handler {
	h := &Handler{whois: whois, metrics: m, log: logger}
	h.proxy = newReverseProxy(transport, NewH2CTransport(), m, logger)
	return h
}

// SetRoutes installs the routing state for new requests.
func (h *Handler) SetRoutes(r *Routes) { h.routes.Store(r) }

// ConnContext gives each connection a lazily filled identity, so WhoIs runs
// once per connection rather than once per request. Use it as the
// http.Server's ConnContext.
func ConnContext(ctx context.Context, _ net.Conn) context.Context {
	return context.WithValue(ctx, connKey{}, new(connIdentity))
}

type connKey struct{}

type connIdentity struct {
	once sync.Once
	id   *route.Identity
}

// Listener returns the http.Handler for one listener. public marks Funnel
// (or the public listen address): the only way Request.Public becomes true.
func (h *Handler) Listener(public bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { h.serve(w, r, public) })
}

func (h *Handler) serve(w http.ResponseWriter, r *http.Request, public bool) {
	start := time.Now()
	rw := &recorder{ResponseWriter: w}
	routeLabel := "none"
	defer func() {
		h.metrics.Requests.WithLabelValues(routeLabel, strconv.Itoa(rw.statusOrOK())).Inc()
		h.metrics.Latency.WithLabelValues(routeLabel).Observe(time.Since(start).Seconds())
		h.metrics.Bytes.WithLabelValues("l7", "out").Add(float64(rw.bytes))
	}()
	if r.Body != nil && r.Body != http.NoBody {
		r.Body = &countingBody{ReadCloser: r.Body, add: h.metrics.Bytes.WithLabelValues("l7", "in").Add}
	}
	// Routers (plugins) never see a client's Tailscale-* headers.
	stripTailscale(r.Header)
	routes := h.routes.Load()
	if routes == nil {
		http.Error(rw, "proxy has no active config", http.StatusServiceUnavailable)
		return
	}
	req := &route.Request{
		Method: r.Method, Host: r.Host, URI: r.URL.RequestURI(), Path: r.URL.Path,
		Header: r.Header, Public: public,
	}
	if !public {
		req.Identity = h.identity(r)
	}
	req.Route = routes.Table.MatchRequest(r)
	if req.Route != nil {
		routeLabel = req.Route.Host + req.Route.Path
		if req.Route.Name != "" {
			routeLabel = req.Route.Name
		}
	}
	d, err := routes.Routers.Route(r.Context(), req, route.Decision{})
	if err != nil {
		h.log.Error("routing failed", "host", r.Host, "path", r.URL.Path, "err", err)
		http.Error(rw, "routing failed", http.StatusInternalServerError)
		return
	}
	h.apply(rw, r, req, d, routes)
}

// apply carries out a routing decision.
func (h *Handler) apply(w http.ResponseWriter, r *http.Request, req *route.Request, d route.Decision, routes *Routes) {
	for k, vs := range d.SetResponseHeaders {
		w.Header()[http.CanonicalHeaderKey(k)] = vs
	}
	if d.DenyPublic && req.Public {
		addResponseHeaders(w.Header(), d)
		http.Error(w, "not available through Funnel", http.StatusForbidden)
		return
	}
	if d.Action != route.Forward {
		// The proxy's own answers; a backend's answer gets them after its
		// own values (ModifyResponse), an error in its place too.
		addResponseHeaders(w.Header(), d)
	}
	switch d.Action {
	case route.Redirect:
		status := d.Status
		if status < 300 || status > 399 {
			status = http.StatusFound
		}
		http.Redirect(w, r, d.Location, status)
	case route.Deny:
		http.Error(w, d.Body, localStatus(d.Status))
	default:
		backend := d.Backend
		if backend == nil && req.Route != nil && len(req.Route.Backends) > 0 {
			backend = &req.Route.Backends[0]
		}
		if backend == nil || !allowed(req.Route, backend) {
			addResponseHeaders(w.Header(), d)
			http.Error(w, routetable.NotFoundBody, http.StatusNotFound)
			return
		}
		up := &upstream{backend: *backend, https: routes.HTTPSBackends[backend.Address], h2c: routes.H2CBackends[backend.Address],
			identity: req.Identity, public: req.Public, decision: d}
		if d.Timeout > 0 {
			ctx, cancel := context.WithTimeout(r.Context(), d.Timeout)
			defer cancel()
			r = r.WithContext(ctx)
		}
		h.proxy.mirror(r, up, routes)
		h.proxy.forward(w, r, up)
	}
}

// addResponseHeaders appends the decision's added response headers to h,
// after any values h has: an addition, not a replacement.
func addResponseHeaders(h http.Header, d route.Decision) {
	for k, vs := range d.AddResponseHeaders {
		for _, v := range vs {
			h.Add(k, v)
		}
	}
}

// localStatus is the status of a router's own answer (Deny): 2xx, 4xx and
// 5xx as the router chose (a plugin may answer a health check itself);
// anything else (1xx, 3xx without a redirect, out of range) is 403, since
// the router meant to stop the request.
func localStatus(status int) int {
	switch {
	case status >= 200 && status <= 299, status >= 400 && status <= 599:
		return status
	default:
		return http.StatusForbidden
	}
}

// allowed reports whether b is one of the route's backends: a router may
// only pick among those.
func allowed(rt *route.Route, b *route.Backend) bool {
	if rt == nil {
		return false
	}
	for _, c := range rt.Backends {
		if c.Address == b.Address && c.Name == b.Name {
			return true
		}
	}
	return false
}

func (h *Handler) identity(r *http.Request) *route.Identity {
	ci, _ := r.Context().Value(connKey{}).(*connIdentity)
	if ci == nil {
		ci = new(connIdentity)
	}
	ci.once.Do(func() {
		if h.whois == nil {
			return
		}
		id, err := h.whois(r.Context(), r.RemoteAddr)
		if err != nil {
			h.log.Debug("whois failed", "remote", r.RemoteAddr, "err", err)
			return
		}
		ci.id = id
	})
	return ci.id
}
