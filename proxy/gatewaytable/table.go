package gatewaytable

import (
	"context"
	"net/http"
	"strings"

	"github.com/tailplane/tailplane/proxy/config"
	"github.com/tailplane/tailplane/proxy/route"
)

// NotFoundBody is the body of the 404 answered when no entry fits.
const NotFoundBody = "no route for this host and request\n"

// The bodies of the 500s the Gateway API asks for.
const (
	// NoBackendBody answers an entry without backends, or whose weights
	// are all zero.
	NoBackendBody = "no backend for this route\n"
	// InvalidBackendBody answers the share of an invalid backend (a
	// missing Service, a reference no ReferenceGrant permits).
	InvalidBackendBody = "backend not valid\n"
)

// Table is the immutable HTTP route table of one listener port. Build a new
// one for each config.
type Table struct {
	port   int
	scheme string // "http" or "https", the listeners' protocol
	// listeners index each listener hostname's entries by their own
	// hostnames: a request is matched only against the listener that fits
	// its host most specifically (the Gateway API's listener isolation).
	listeners Hosts[*Hosts[*bucket]]
	entries   map[*route.Route]*entry
}

// entry is one HTTPRoute entry of the config, prepared.
type entry struct {
	cfg    *config.HTTPRoute
	route  *route.Route
	match  matcher
	split  *Split
	prefix string // the PathPrefix matched, for ReplacePrefixMatch
}

// listenerIndex is the entries of the listeners of one hostname, by the
// entries' own hostnames, while New builds them.
type listenerIndex struct {
	hosts   Hosts[*bucket]
	buckets map[string]*bucket // by normalized hostname
}

// New builds the table of the HTTP or HTTPS listeners sharing port (they
// all have one protocol, which config validation checks); within one
// hostname, entries keep the config's order, listener by listener.
func New(port int, listeners []config.Listener) *Table {
	t := &Table{port: port, scheme: "http", entries: map[*route.Route]*entry{}}
	byListener := map[string]*listenerIndex{}
	for i := range listeners {
		l := &listeners[i]
		if l.Protocol == config.ListenerHTTPS {
			t.scheme = "https"
		}
		li := byListener[normalize(l.Hostname)]
		if li == nil {
			// Listeners of one hostname on a port (one protocol) share
			// an index; another hostname's never serve its requests.
			li = &listenerIndex{buckets: map[string]*bucket{}}
			byListener[normalize(l.Hostname)] = li
			t.listeners.Add(l.Hostname, &li.hosts)
		}
		for ri := range l.HTTPRoutes {
			r := &l.HTTPRoutes[ri]
			hosts := hostnamesOf(r.Hostnames, l.Hostname)
			e := &entry{cfg: r, match: compileMatch(r.Match), split: NewSplit(r.Backends)}
			e.route = &route.Route{Name: r.Name, Host: strings.Join(hosts, ","), Path: r.Match.Path,
				PathType: string(e.match.pathType), Backends: validBackends(r.Backends)}
			if e.match.pathType == config.MatchPathPrefix {
				e.prefix = e.match.path
			}
			t.entries[e.route] = e
			for _, h := range hosts {
				b := li.buckets[normalize(h)]
				if b == nil {
					b = newBucket()
					li.buckets[normalize(h)] = b
					li.hosts.Add(h, b)
				}
				b.add(e)
			}
		}
	}
	return t
}

// validBackends is a route's allowlist for routers: the backends that can
// receive requests.
func validBackends(bs []config.WeightedBackend) []route.Backend {
	var out []route.Backend
	for _, b := range bs {
		if !b.Invalid {
			out = append(out, route.Backend{Name: b.Service, Address: b.Address})
		}
	}
	return out
}

// MatchRequest returns the route of the first entry that fits r, or nil.
// Only the entries of the listener whose hostname fits r's host most
// specifically are candidates (listener isolation: a request for
// a.foo.example.com on listeners *.foo.example.com and *.example.com never
// reaches the second's routes); among them, entries for the exact host
// first, then wildcards by longest suffix, then any host, each in the
// config's order.
func (t *Table) MatchRequest(r *http.Request) *route.Route {
	return t.match(r.Host, &request{method: r.Method, path: r.URL.Path, rawQuery: r.URL.RawQuery, header: r.Header})
}

func (t *Table) match(host string, req *request) *route.Route {
	hosts, ok := t.listeners.First(host)
	if !ok {
		return nil
	}
	for b := range hosts.Candidates(host) {
		if e := b.match(req); e != nil {
			return e.route
		}
	}
	return nil
}

// Route implements route.Router for the route MatchRequest filled in
// req.Route: a redirect, or a Forward to a backend picked by weight with the
// entry's filters, or 404 (no entry), or 500 (no backend to pick, or an
// invalid one picked).
func (t *Table) Route(_ context.Context, req *route.Request, _ route.Decision) (route.Decision, error) {
	var e *entry
	if req.Route != nil {
		e = t.entries[req.Route]
	}
	if e == nil {
		return route.Decision{Action: route.Deny, Status: http.StatusNotFound, Body: NotFoundBody}, nil
	}
	f := &e.cfg.Filters
	d := route.Decision{}
	responseHeaders(&d, f.ResponseHeaders)
	if f.Redirect != nil {
		d.Action, d.Status, d.Location = route.Redirect, f.Redirect.StatusCode, t.location(e, req)
		if d.Status == 0 {
			d.Status = http.StatusFound
		}
		return d, nil
	}
	b, ok := e.split.Pick()
	switch {
	case !ok:
		d.Action, d.Status, d.Body = route.Deny, http.StatusInternalServerError, NoBackendBody
		return d, nil
	case b.Invalid:
		d.Action, d.Status, d.Body = route.Deny, http.StatusInternalServerError, InvalidBackendBody
		return d, nil
	}
	d.Action, d.Backend = route.Forward, &route.Backend{Name: b.Service, Address: b.Address}
	requestHeaders(&d, f.RequestHeaders, req.Header)
	if rw := f.Rewrite; rw != nil {
		d.Host = rw.Hostname
		if rw.Path != nil {
			d.RewriteURI = withQuery(escapePath(modifyPath(rw.Path, e.prefix, req.Path)), req.URI)
		}
	}
	d.Mirrors = mirrors(f.Mirrors)
	d.Timeout = timeout(e.cfg.RequestTimeoutMillis, e.cfg.BackendTimeoutMillis)
	return d, nil
}
