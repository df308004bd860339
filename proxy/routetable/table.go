// Package routetable is the proxy's built-in L7 routing table: it matches a
// request's host and path against the config's rules (exact host, then
// wildcard host, then any host; longest path first, Exact before Prefix at
// equal length; then the default backend) and, as a route.Router, turns the
// match into a Forward decision or a 404.
//
// It imports only proxy/config, proxy/route and the standard library.
package routetable

import (
	"context"
	"net"
	"net/http"
	"sort"
	"strings"

	"github.com/tailplane/tailplane/proxy/config"
	"github.com/tailplane/tailplane/proxy/route"
)

// NotFoundBody is the body of the 404 answered when nothing matches.
const NotFoundBody = "no route for this host and path\n"

// Table is an immutable routing table. Build a new one for each config.
type Table struct {
	exact    map[string][]entry // by lower-case host
	wildcard map[string][]entry // by the suffix after "*." (lower-case)
	any      []entry
	fallback *route.Route
}

type entry struct {
	path  string // as configured
	exact bool
	route *route.Route
}

// New builds the table for an L7 config section. The section must have
// passed config validation.
func New(l7 *config.L7) *Table {
	t := &Table{exact: map[string][]entry{}, wildcard: map[string][]entry{}}
	for _, r := range l7.Rules {
		host := strings.ToLower(r.Host)
		for _, p := range r.Paths {
			pt := p.PathType
			if pt == "" {
				pt = config.PathPrefix
			}
			e := entry{path: p.Path, exact: pt == config.PathExact, route: &route.Route{
				Host: r.Host, Path: p.Path, PathType: string(pt),
				Backends: backends(p.Backend, l7.ExtraBackends),
			}}
			switch {
			case host == "":
				t.any = append(t.any, e)
			case strings.HasPrefix(host, "*."):
				t.wildcard[host[2:]] = append(t.wildcard[host[2:]], e)
			default:
				t.exact[host] = append(t.exact[host], e)
			}
		}
	}
	sortEntries(t.any)
	for _, m := range []map[string][]entry{t.exact, t.wildcard} {
		for _, es := range m {
			sortEntries(es)
		}
	}
	if l7.DefaultBackend != nil {
		t.fallback = &route.Route{Path: "/", PathType: string(config.PathPrefix),
			Backends: backends(*l7.DefaultBackend, l7.ExtraBackends)}
	}
	return t
}

// BackendOf converts a config backend to the routing view of it.
func BackendOf(b config.Backend) route.Backend {
	return route.Backend{Name: b.Service, Address: b.Address}
}

// backends is a route's allowlist: its own backend (the default), then the
// config's extra backends that routers may choose instead.
func backends(own config.Backend, extra []config.Backend) []route.Backend {
	out := make([]route.Backend, 0, 1+len(extra))
	out = append(out, BackendOf(own))
	for _, b := range extra {
		if b.Service != own.Service {
			out = append(out, BackendOf(b))
		}
	}
	return out
}

// sortEntries orders longest path first and Exact before Prefix at equal
// length, so the first match is the winner.
func sortEntries(es []entry) {
	sort.SliceStable(es, func(i, j int) bool {
		if len(es[i].path) != len(es[j].path) {
			return len(es[i].path) > len(es[j].path)
		}
		return es[i].exact && !es[j].exact
	})
}

// MatchRequest returns the route of r's host and path, or nil: Match for
// the l7 handler.
func (t *Table) MatchRequest(r *http.Request) *route.Route { return t.Match(r.Host, r.URL.Path) }

// Match returns the route for host (a port is ignored) and path, or nil.
func (t *Table) Match(host, path string) *route.Route {
	host = strings.ToLower(stripPort(host))
	if r := firstMatch(t.exact[host], path); r != nil {
		return r
	}
	if _, suffix, ok := strings.Cut(host, "."); ok {
		if r := firstMatch(t.wildcard[suffix], path); r != nil {
			return r
		}
	}
	if r := firstMatch(t.any, path); r != nil {
		return r
	}
	return t.fallback
}

func firstMatch(es []entry, path string) *route.Route {
	for _, e := range es {
		if e.exact && path == e.path || !e.exact && prefixMatch(e.path, path) {
			return e.route
		}
	}
	return nil
}

// prefixMatch matches whole path elements, ignoring a trailing slash on the
// prefix: "/foo" matches "/foo", "/foo/" and "/foo/bar", not "/foobar".
func prefixMatch(prefix, path string) bool {
	p := strings.TrimSuffix(prefix, "/")
	return p == "" || path == p || strings.HasPrefix(path, p+"/")
}

func stripPort(host string) string {
	if h, _, err := net.SplitHostPort(host); err == nil {
		return h
	}
	return host
}

// Route implements route.Router: it forwards to the matched route's default
// backend, or denies with 404 when the request matched nothing. The caller
// fills req.Route with Match first.
func (t *Table) Route(_ context.Context, req *route.Request, _ route.Decision) (route.Decision, error) {
	if req.Route == nil || len(req.Route.Backends) == 0 {
		return route.Decision{Action: route.Deny, Status: http.StatusNotFound, Body: NotFoundBody}, nil
	}
	b := req.Route.Backends[0]
	return route.Decision{Action: route.Forward, Backend: &b}, nil
}
