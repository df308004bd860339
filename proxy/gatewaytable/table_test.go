package gatewaytable

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/tailplane/tailplane/proxy/config"
	"github.com/tailplane/tailplane/proxy/route"
)

func be(name string, weight int32) config.WeightedBackend {
	return config.WeightedBackend{Backend: config.Backend{Service: name, Address: "10.0.0.1:80"}, Weight: weight}
}

func entry1(name string, hosts []string, m config.HTTPMatch) config.HTTPRoute {
	return config.HTTPRoute{Name: name, Hostnames: hosts, Match: m, Backends: []config.WeightedBackend{be(name, 1)}}
}

// decide matches and routes one request through t, as the l7 handler does.
func decide(t *testing.T, tab *Table, method, target string, hdr http.Header) (*route.Route, route.Decision) {
	t.Helper()
	r := httptest.NewRequest(method, target, nil)
	for k, v := range hdr {
		r.Header[k] = v
	}
	rt := tab.MatchRequest(r)
	d, err := tab.Route(context.Background(), &route.Request{Method: r.Method, Host: r.Host, URI: r.URL.RequestURI(),
		Path: r.URL.Path, Header: r.Header, Route: rt}, route.Decision{})
	if err != nil {
		t.Fatal(err)
	}
	return rt, d
}

func nameOf(rt *route.Route) string {
	if rt == nil {
		return "<none>"
	}
	return rt.Name
}

// Exact hosts before wildcards, longer wildcards before shorter, then any
// host; within one hostname the config's order, first fit wins; a
// wildcard never matches its bare domain; an entry without hostnames takes
// its listener's.
func TestPrecedenceAndMatchKinds(t *testing.T) {
	prefix := func(p string) config.HTTPMatch { return config.HTTPMatch{PathType: config.MatchPathPrefix, Path: p} }
	tab := New(80, []config.Listener{
		{Name: "any", Port: 80, Protocol: config.ListenerHTTP, HTTPRoutes: []config.HTTPRoute{
			entry1("any-api", nil, prefix("/api")),
			entry1("any-all", nil, config.HTTPMatch{}),
			entry1("any-exact-late", nil, config.HTTPMatch{PathType: config.MatchExact, Path: "/api/exact"}),
			entry1("wild-short", []string{"*.example.com"}, prefix("/")),
			entry1("wild-long-post", []string{"*.b.example.com"}, config.HTTPMatch{PathType: config.MatchExact, Path: "/x", Method: "POST"}),
			entry1("wild-long", []string{"*.b.example.com"}, prefix("/x")),
			entry1("exact-hdr", []string{"app.example.com"}, config.HTTPMatch{Path: "/", PathType: config.MatchPathPrefix,
				Headers: []config.ValueMatch{{Name: "x-env", Value: "canary"}}}),
			entry1("exact-re-hdr", []string{"app.example.com"}, config.HTTPMatch{
				Headers: []config.ValueMatch{{Name: "X-Id", Regex: true, Value: "[0-9]+"}}}),
			entry1("exact-query", []string{"APP.example.com"}, config.HTTPMatch{QueryParams: []config.ValueMatch{{Name: "v", Value: "2"}}}),
			entry1("exact-re-query", []string{"app.example.com"}, config.HTTPMatch{QueryParams: []config.ValueMatch{{Name: "v", Regex: true, Value: "3|4"}}}),
			entry1("exact-regex", []string{"app.example.com"}, config.HTTPMatch{PathType: config.MatchRegularExpression, Path: "/u/[0-9]+"}),
			entry1("exact-exact", []string{"app.example.com"}, config.HTTPMatch{PathType: config.MatchExact, Path: "/e"}),
			entry1("exact-prefix", []string{"app.example.com"}, prefix("/p/")),
		}},
		{Name: "scoped", Port: 80, Protocol: config.ListenerHTTP, Hostname: "scoped.example.org", HTTPRoutes: []config.HTTPRoute{
			entry1("scoped", nil, prefix("/")),
		}},
	})
	cases := []struct {
		method, target string
		hdr            http.Header
		want           string
	}{
		{"GET", "http://app.example.com/anything", http.Header{"X-Env": {"canary"}}, "exact-hdr"},
		{"GET", "http://app.example.com:8080/anything", http.Header{"X-Env": {"prod"}, "X-Id": {"42"}}, "exact-re-hdr"},
		{"GET", "http://app.example.com/anything", http.Header{"X-Id": {"42a"}}, "wild-short"}, // regex is anchored
		{"GET", "http://app.example.com/q?v=2", nil, "exact-query"},
		{"GET", "http://app.example.com/q?v=4", nil, "exact-re-query"},
		{"GET", "http://app.example.com/q?v=34", nil, "wild-short"},
		{"GET", "http://app.example.com/u/12", nil, "exact-regex"},
		{"GET", "http://app.example.com/u/12/x", nil, "wild-short"}, // regex matches the whole path
		{"GET", "http://app.example.com/e", nil, "exact-exact"},
		{"GET", "http://app.example.com/e/", nil, "wild-short"},
		{"GET", "http://app.example.com/p", nil, "exact-prefix"}, // trailing slash of the prefix ignored
		{"GET", "http://app.example.com/p/q", nil, "exact-prefix"},
		{"GET", "http://app.example.com/pq", nil, "wild-short"}, // element-wise
		{"GET", "http://APP.EXAMPLE.COM./e", nil, "exact-exact"},
		{"POST", "http://a.b.example.com/x", nil, "wild-long-post"},
		{"GET", "http://a.b.example.com/x", nil, "wild-long"},
		{"GET", "http://deep.a.b.example.com/x/y", nil, "wild-long"}, // any number of labels
		{"GET", "http://a.b.example.com/y", nil, "wild-short"},
		{"GET", "http://b.example.com/x", nil, "wild-short"}, // *.b.example.com does not match b.example.com
		{"GET", "http://example.com/api/v1", nil, "any-api"}, // nor *.example.com example.com
		{"GET", "http://other.org/", nil, "any-all"},
		{"GET", "http://other.org/api/exact", nil, "any-api"}, // an earlier prefix entry beats a later Exact one
		{"GET", "http://scoped.example.org/", nil, "scoped"},
	}
	for _, tc := range cases {
		rt, d := decide(t, tab, tc.method, tc.target, tc.hdr)
		if nameOf(rt) != tc.want || d.Action != route.Forward || d.Backend == nil || d.Backend.Name != tc.want {
			t.Errorf("%s %s %v: matched %s, decision %+v; want %s", tc.method, tc.target, tc.hdr, nameOf(rt), d, tc.want)
		}
	}
	// The listener's hostname scopes an entry without hostnames.
	tab = New(80, []config.Listener{{Port: 80, Protocol: config.ListenerHTTP, Hostname: "only.example.org",
		HTTPRoutes: []config.HTTPRoute{entry1("scoped", nil, config.HTTPMatch{})}}})
	if rt, d := decide(t, tab, "GET", "http://other.example.org/", nil); rt != nil || d.Action != route.Deny || d.Status != 404 || d.Body != NotFoundBody {
		t.Errorf("a host outside the listener's: %s %+v, want 404", nameOf(rt), d)
	}
}

// The Gateway API answers 500 for a rule without backends, with all
// weights zero, and for the share of an invalid backend; the rest of the
// share is forwarded.
func TestBackendsZeroAndInvalid(t *testing.T) {
	invalid := config.WeightedBackend{Backend: config.Backend{Service: "gone"}, Weight: 1, Invalid: true}
	tab := New(80, []config.Listener{{Port: 80, Protocol: config.ListenerHTTP, HTTPRoutes: []config.HTTPRoute{
		{Name: "none", Match: config.HTTPMatch{PathType: config.MatchExact, Path: "/none"}},
		{Name: "zero", Match: config.HTTPMatch{PathType: config.MatchExact, Path: "/zero"}, Backends: []config.WeightedBackend{be("a", 0)}},
		{Name: "invalid", Match: config.HTTPMatch{PathType: config.MatchExact, Path: "/invalid"}, Backends: []config.WeightedBackend{invalid}},
		{Name: "half", Match: config.HTTPMatch{PathType: config.MatchExact, Path: "/half"}, Backends: []config.WeightedBackend{invalid, be("ok", 1)}},
	}}})
	for path, body := range map[string]string{"/none": NoBackendBody, "/zero": NoBackendBody, "/invalid": InvalidBackendBody} {
		if _, d := decide(t, tab, "GET", "http://h"+path, nil); d.Action != route.Deny || d.Status != 500 || d.Body != body {
			t.Errorf("%s: %+v, want 500 %q", path, d, body)
		}
	}
	counts := map[int]int{}
	for range 2000 {
		rt, d := decide(t, tab, "GET", "http://h/half", nil)
		counts[d.Status]++
		if d.Action == route.Forward && (d.Backend.Name != "ok" || len(rt.Backends) != 1 || rt.Backends[0].Name != "ok") {
			t.Fatalf("forwarded to %+v with allowlist %+v; the invalid backend must be on neither", d.Backend, rt.Backends)
		}
	}
	if counts[500] < 850 || counts[500] > 1150 {
		t.Errorf("invalid backend's half got %d of 2000 answered 500, want about 1000", counts[500])
	}
}

// Every filter: the redirect's port rules and path modifiers, header
// edits, the rewrite's ReplacePrefixMatch, mirrors, timeouts.
func TestFilters(t *testing.T) {
	redirect := func(name, path string, rd config.Redirect) config.HTTPRoute {
		return config.HTTPRoute{Name: name, Match: config.HTTPMatch{PathType: config.MatchPathPrefix, Path: path},
			Filters: config.HTTPFilters{Redirect: &rd}}
	}
	listeners := func(proto config.ListenerProtocol, port int) []config.Listener {
		return []config.Listener{{Port: port, Protocol: proto, HTTPRoutes: []config.HTTPRoute{
			redirect("to-https", "/s", config.Redirect{Scheme: "https", StatusCode: 301}),
			redirect("to-http", "/h", config.Redirect{Scheme: "http"}),
			redirect("same", "/same", config.Redirect{Hostname: "new.example.com", Path: &config.PathModifier{Type: config.ReplaceFullPath, Value: "/full"}}),
			redirect("port", "/port", config.Redirect{Scheme: "https", Port: 8443, Path: &config.PathModifier{Type: config.ReplacePrefixMatch, Value: "/bar"}}),
			redirect("deflt", "/deflt", config.Redirect{Port: 80}),
		}}}
	}
	cases := []struct {
		proto    config.ListenerProtocol
		port     int
		target   string
		status   int
		location string
	}{
		{config.ListenerHTTP, 80, "http://a.example.com:80/s/x?q=1", 301, "https://a.example.com/s/x?q=1"},
		{config.ListenerHTTP, 8080, "http://a.example.com:8080/s", 301, "https://a.example.com/s"}, // scheme set: its well-known port
		{config.ListenerHTTPS, 8443, "https://a.example.com/h", 302, "http://a.example.com/h"},
		{config.ListenerHTTP, 8080, "http://a.example.com:8080/same/x", 302, "http://new.example.com:8080/full"}, // no scheme: the listener's port
		{config.ListenerHTTPS, 443, "https://a.example.com/same", 302, "https://new.example.com/full"},
		{config.ListenerHTTP, 80, "http://a.example.com/port/foo?x", 302, "https://a.example.com:8443/bar/foo?x"},
		{config.ListenerHTTPS, 443, "https://a.example.com/deflt", 302, "https://a.example.com:80/deflt"},
		{config.ListenerHTTP, 8080, "http://a.example.com:8080/deflt", 302, "http://a.example.com/deflt"},
	}
	for _, tc := range cases {
		_, d := decide(t, New(tc.port, listeners(tc.proto, tc.port)), "GET", tc.target, nil)
		if d.Action != route.Redirect || d.Status != tc.status || d.Location != tc.location {
			t.Errorf("%s listener on %d, %s: %d %q (action %v), want %d %q", tc.proto, tc.port, tc.target, d.Status, d.Location, d.Action, tc.status, tc.location)
		}
	}

	rewrite := func(prefix, value string) *Table {
		return New(80, []config.Listener{{Port: 80, Protocol: config.ListenerHTTP, HTTPRoutes: []config.HTTPRoute{{
			Name: "rw", Match: config.HTTPMatch{PathType: config.MatchPathPrefix, Path: prefix}, Backends: []config.WeightedBackend{be("a", 1)},
			Filters: config.HTTPFilters{Rewrite: &config.Rewrite{Hostname: "internal", Path: &config.PathModifier{Type: config.ReplacePrefixMatch, Value: value}}},
		}}}})
	}
	for _, tc := range []struct{ prefix, value, path, want string }{
		{"/prefix", "/", "/prefix/foo", "/foo"},
		{"/prefix", "/bar", "/prefix/foo", "/bar/foo"},
		{"/prefix/", "/bar/", "/prefix/foo", "/bar/foo"},
		{"/prefix", "/bar", "/prefix", "/bar"},
		{"/prefix", "/", "/prefix", "/"},
		{"/prefix", "/bar", "/prefix/", "/bar/"},
		{"/", "/bar", "/foo", "/bar/foo"},
		{"/prefix", "/b r", "/prefix/x?y=1", "/b%20r/x?y=1"},
	} {
		_, d := decide(t, rewrite(tc.prefix, tc.value), "GET", "http://h"+tc.path, nil)
		if d.RewriteURI != tc.want || d.Host != "internal" {
			t.Errorf("rewrite %s -> %s of %s: %q host %q, want %q", tc.prefix, tc.value, tc.path, d.RewriteURI, d.Host, tc.want)
		}
	}

	tab := New(80, []config.Listener{{Port: 80, Protocol: config.ListenerHTTP, HTTPRoutes: []config.HTTPRoute{{
		Name: "edit", Backends: []config.WeightedBackend{be("a", 1)}, RequestTimeoutMillis: 3000, BackendTimeoutMillis: 1000,
		Filters: config.HTTPFilters{
			RequestHeaders: &config.HeaderModifier{Set: []config.Header{{Name: "x-set", Value: "s"}},
				Add: []config.Header{{Name: "x-add", Value: "new"}, {Name: "x-set", Value: "s2"}}, Remove: []string{"x-gone"}},
			ResponseHeaders: &config.HeaderModifier{Set: []config.Header{{Name: "x-r", Value: "r"}},
				Add: []config.Header{{Name: "x-ra", Value: "ra"}}, Remove: []string{"server"}},
			Rewrite: &config.Rewrite{Path: &config.PathModifier{Type: config.ReplaceFullPath, Value: "/full"}},
			Mirrors: []config.Mirror{{Backend: config.Backend{Service: "all", Address: "10.0.0.8:80"}},
				{Backend: config.Backend{Service: "never", Address: "10.0.0.9:80"}, Percent: 0}},
		},
	}}}})
	_, d := decide(t, tab, "GET", "http://h/x?q=1", http.Header{"X-Add": {"old"}, "X-Gone": {"1"}})
	if got := d.SetRequestHeaders; strings.Join(got["X-Set"], ",") != "s,s2" || strings.Join(got["X-Add"], ",") != "old,new" || len(got) != 2 {
		t.Errorf("request headers to set %v, want X-Set s,s2 and X-Add old,new", got)
	}
	if len(d.RemoveRequestHeaders) != 1 || d.RemoveRequestHeaders[0] != "x-gone" {
		t.Errorf("request headers to remove %v", d.RemoveRequestHeaders)
	}
	if d.SetResponseHeaders.Get("X-R") != "r" || d.AddResponseHeaders.Get("X-Ra") != "ra" || len(d.RemoveResponseHeaders) != 1 {
		t.Errorf("response edits %v %v %v", d.SetResponseHeaders, d.AddResponseHeaders, d.RemoveResponseHeaders)
	}
	if d.RewriteURI != "/full?q=1" || d.Host != "" {
		t.Errorf("full path rewrite %q (host %q), want /full?q=1 and the Host kept", d.RewriteURI, d.Host)
	}
	if len(d.Mirrors) != 2 || d.Mirrors[0].Name != "all" {
		t.Errorf("mirrors %+v, want both (percent zero is 100)", d.Mirrors)
	}
	if d.Timeout != time.Second {
		t.Errorf("timeout %v, want the tighter 1s", d.Timeout)
	}
}

// TLS passthrough picks by SNI with the same precedence; a name no route
// takes, or an invalid backend, closes the connection.
func TestSNITable(t *testing.T) {
	tab := NewSNITable([]config.Listener{{Port: 8443, Protocol: config.ListenerTLS, Hostname: "*.example.com", TLSRoutes: []config.TLSRoute{
		{Name: "db", Hostnames: []string{"db.example.com"}, Backends: []config.WeightedBackend{be("db", 1)}},
		{Name: "wild", Backends: []config.WeightedBackend{be("wild", 1)}},
		{Name: "bad", Hostnames: []string{"bad.example.com"}, Backends: []config.WeightedBackend{{Backend: config.Backend{Service: "x"}, Weight: 1, Invalid: true}}},
	}}})
	for sni, want := range map[string]string{"db.example.com": "db", "DB.example.com": "db", "x.y.example.com": "wild", "bad.example.com": "", "example.com": "", "": ""} {
		name, b, ok := tab.Pick(sni)
		if got := map[bool]string{true: b.Service}[ok]; got != want {
			t.Errorf("SNI %q: route %q backend %q (ok %v), want %q", sni, name, b.Service, ok, want)
		}
	}
}

// A request is matched only against the listener whose hostname fits its
// host most specifically: a route of a broader listener never serves a
// host a narrower listener claims, even when the narrower has no fitting
// entry.
func TestListenerIsolation(t *testing.T) {
	prefix := func(p string) config.HTTPMatch { return config.HTTPMatch{PathType: config.MatchPathPrefix, Path: p} }
	tab := New(80, []config.Listener{
		{Name: "empty", Port: 80, Protocol: config.ListenerHTTP, HTTPRoutes: []config.HTTPRoute{entry1("empty", nil, prefix("/empty"))}},
		{Name: "wild", Port: 80, Protocol: config.ListenerHTTP, Hostname: "*.example.com", HTTPRoutes: []config.HTTPRoute{entry1("wild", nil, prefix("/wild"))}},
		{Name: "wild-foo", Port: 80, Protocol: config.ListenerHTTP, Hostname: "*.foo.example.com", HTTPRoutes: []config.HTTPRoute{entry1("wild-foo", nil, prefix("/wild-foo"))}},
		{Name: "exact", Port: 80, Protocol: config.ListenerHTTP, Hostname: "bar.example.com", HTTPRoutes: []config.HTTPRoute{entry1("exact", nil, prefix("/exact"))}},
	})
	for _, c := range []struct{ target, want string }{
		{"http://bar.example.com/exact", "exact"},
		{"http://bar.example.com/wild", "<none>"},
		{"http://bar.example.com/empty", "<none>"},
		{"http://a.foo.example.com/wild-foo", "wild-foo"},
		{"http://a.foo.example.com/wild", "<none>"},
		{"http://a.example.com/wild", "wild"},
		{"http://a.example.com/empty", "<none>"},
		{"http://other.test/empty", "empty"},
		{"http://other.test/wild", "<none>"},
	} {
		if rt, _ := decide(t, tab, "GET", c.target, nil); nameOf(rt) != c.want {
			t.Errorf("%s matched %s, want %s", c.target, nameOf(rt), c.want)
		}
	}
}
