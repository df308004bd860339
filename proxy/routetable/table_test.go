package routetable

import (
	"context"
	"net/http"
	"testing"

	"github.com/tailplane/tailplane/proxy/config"
	"github.com/tailplane/tailplane/proxy/route"
)

func be(name string) config.Backend { return config.Backend{Service: name, Address: "10.0.0.1:80"} }

func testTable(withDefault bool) *Table {
	l7 := &config.L7{Rules: []config.Rule{
		{Host: "app.example.com", Paths: []config.Path{
			{Path: "/", PathType: config.PathPrefix, Backend: be("app-root")},
			{Path: "/api", PathType: config.PathPrefix, Backend: be("app-api")},
			{Path: "/api/v2/", PathType: config.PathImplementationSpecific, Backend: be("app-api-v2")},
			{Path: "/login", PathType: config.PathExact, Backend: be("app-login-exact")},
			{Path: "/login", PathType: config.PathPrefix, Backend: be("app-login-prefix")},
		}},
		{Host: "*.example.com", Paths: []config.Path{
			{Path: "/", Backend: be("wild")},
		}},
		{Host: "Only.Example.org", Paths: []config.Path{
			{Path: "/exact", PathType: config.PathExact, Backend: be("org-exact")},
		}},
		{Paths: []config.Path{{Path: "/any", Backend: be("any-host")}}},
	}}
	if withDefault {
		d := be("default")
		l7.DefaultBackend = &d
	}
	return New(l7)
}

func TestMatch(t *testing.T) {
	tbl := testTable(true)
	cases := []struct{ host, path, want string }{
		{"app.example.com", "/", "app-root"},
		{"app.example.com:443", "/x", "app-root"},
		{"APP.example.com", "/api", "app-api"},
		{"app.example.com", "/api/users", "app-api"},
		{"app.example.com", "/apiary", "app-root"}, // element-wise prefix
		{"app.example.com", "/api/v2", "app-api-v2"},
		{"app.example.com", "/api/v2/x", "app-api-v2"},
		{"app.example.com", "/login", "app-login-exact"}, // Exact beats Prefix at equal length
		{"app.example.com", "/login/sso", "app-login-prefix"},
		{"other.example.com", "/anything", "wild"},
		{"a.b.example.com", "/", "default"}, // wildcard matches one label only
		{"example.com", "/", "default"},     // wildcard needs a label
		{"only.example.org", "/exact", "org-exact"},
		{"only.example.org", "/exact/more", "default"}, // Exact does not match below
		{"only.example.org", "/any/x", "any-host"},     // falls through to any-host rules
		{"unknown.net", "/any", "any-host"},
		{"unknown.net", "/", "default"},
	}
	for _, c := range cases {
		r := tbl.Match(c.host, c.path)
		if r == nil || r.Backends[0].Name != c.want {
			got := "<nil>"
			if r != nil {
				got = r.Backends[0].Name
			}
			t.Errorf("Match(%q, %q) = %s, want %s", c.host, c.path, got, c.want)
		}
	}
}

func TestRouteDecisions(t *testing.T) {
	tbl := testTable(false)
	if r := tbl.Match("unknown.net", "/"); r != nil {
		t.Fatalf("without a default backend nothing should match, got %+v", r)
	}
	ctx := context.Background()
	d, err := tbl.Route(ctx, &route.Request{Host: "unknown.net", Path: "/"}, route.Decision{})
	if err != nil || d.Action != route.Deny || d.Status != http.StatusNotFound || d.Body != NotFoundBody {
		t.Fatalf("no route: got %+v, %v; want 404 deny", d, err)
	}
	req := &route.Request{Host: "app.example.com", Path: "/api"}
	req.Route = tbl.Match(req.Host, req.Path)
	d, err = tbl.Route(ctx, req, route.Decision{})
	if err != nil || d.Action != route.Forward || d.Backend == nil || d.Backend.Name != "app-api" || d.Backend.Address != "10.0.0.1:80" {
		t.Fatalf("matched route: got %+v, %v; want forward to app-api", d, err)
	}
	if req.Route.PathType != "Prefix" || req.Route.Host != "app.example.com" || req.Route.Path != "/api" {
		t.Fatalf("route fields wrong: %+v", req.Route)
	}
}
