package gatewaytable

import (
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tailplane/tailplane/proxy/config"
	"github.com/tailplane/tailplane/proxy/route"
)

// location is the Location of e's redirect for req, with the Gateway
// API's rules: empty fields keep the request's scheme, host and path; a
// port left out is the scheme's well-known one when the redirect names a
// scheme, else the listener's; a port that is the scheme's default is not
// written.
func (t *Table) location(e *entry, req *route.Request) string {
	rd := e.cfg.Filters.Redirect
	scheme := t.scheme
	if rd.Scheme != "" {
		scheme = rd.Scheme
	}
	host := StripPort(req.Host)
	if rd.Hostname != "" {
		host = rd.Hostname
	}
	port := rd.Port
	switch {
	case port != 0:
	case rd.Scheme != "":
		port = defaultPort(rd.Scheme)
	default:
		port = t.port
	}
	if port != defaultPort(scheme) {
		host = net.JoinHostPort(host, strconv.Itoa(port))
	}
	path := req.Path
	if rd.Path != nil {
		path = modifyPath(rd.Path, e.prefix, req.Path)
	}
	return withQuery(scheme+"://"+host+escapePath(path), req.URI)
}

func defaultPort(scheme string) int {
	if scheme == "https" {
		return 443
	}
	return 80
}

// modifyPath applies a path modifier to path. For ReplacePrefixMatch,
// prefix is what the entry's PathPrefix matched (without a trailing
// slash): replacing "/prefix" of "/prefix/foo" with "/" gives "/foo", with
// "/bar" gives "/bar/foo".
func modifyPath(m *config.PathModifier, prefix, path string) string {
	if m.Type == config.ReplaceFullPath {
		return m.Value
	}
	rest := strings.TrimPrefix(path, prefix)
	out := strings.TrimSuffix(m.Value, "/") + rest
	if out == "" {
		return "/"
	}
	return out
}

// escapePath encodes a decoded path for a request-target or a URL.
func escapePath(p string) string {
	return (&url.URL{Path: p}).EscapedPath()
}

// withQuery appends the query of uri (a request-target) to target.
func withQuery(target, uri string) string {
	if _, q, ok := strings.Cut(uri, "?"); ok && q != "" {
		return target + "?" + q
	}
	return target
}

// requestHeaders turns the request header modifier into the decision's
// edits, as the complete values to set, so that routers after the table
// (plugins) see the request as the backend will: set replaces, add appends
// to what the request has (or what set left), remove wins over both.
func requestHeaders(d *route.Decision, m *config.HeaderModifier, have http.Header) {
	if m == nil {
		return
	}
	set := http.Header{}
	for _, h := range m.Set {
		set[http.CanonicalHeaderKey(h.Name)] = []string{h.Value}
	}
	for _, h := range m.Add {
		k := http.CanonicalHeaderKey(h.Name)
		if _, ok := set[k]; !ok {
			set[k] = slices.Clone(have[k])
		}
		set[k] = append(set[k], h.Value)
	}
	for _, k := range m.Remove {
		delete(set, http.CanonicalHeaderKey(k))
	}
	if len(set) > 0 {
		d.SetRequestHeaders = set
	}
	d.RemoveRequestHeaders = slices.Clone(m.Remove)
}

// responseHeaders turns the response header modifier into the decision's
// edits (fresh maps: routers after the table may change them).
func responseHeaders(d *route.Decision, m *config.HeaderModifier) {
	if m == nil {
		return
	}
	if len(m.Set) > 0 {
		d.SetResponseHeaders = http.Header{}
		for _, h := range m.Set {
			d.SetResponseHeaders[http.CanonicalHeaderKey(h.Name)] = []string{h.Value}
		}
	}
	if len(m.Add) > 0 {
		d.AddResponseHeaders = http.Header{}
		for _, h := range m.Add {
			d.AddResponseHeaders.Add(h.Name, h.Value)
		}
	}
	d.RemoveResponseHeaders = slices.Clone(m.Remove)
}

// mirrors picks the mirrors this request goes to, each with its percent.
func mirrors(ms []config.Mirror) []route.Backend {
	var out []route.Backend
	for _, m := range ms {
		if m.Percent == 0 || m.Percent >= 100 || rand.IntN(100) < m.Percent {
			out = append(out, route.Backend{Name: m.Backend.Service, Address: m.Backend.Address})
		}
	}
	return out
}

// timeout is the tighter of the request and backend timeouts; zero is
// none.
func timeout(requestMillis, backendMillis int64) time.Duration {
	ms := requestMillis
	if backendMillis > 0 && (ms == 0 || backendMillis < ms) {
		ms = backendMillis
	}
	return time.Duration(ms) * time.Millisecond
}
