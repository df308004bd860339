package examples_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/log"

	"github.com/tailplane/tailplane/plugins/host"
	"github.com/tailplane/tailplane/plugins/internal/wasmbuild"
	"github.com/tailplane/tailplane/plugins/sdk/abi"
	"github.com/tailplane/tailplane/proxy/route"
)

func loadExample(t *testing.T, module []byte, config string, caps ...abi.Capability) *host.Plugin {
	t.Helper()
	e, err := host.NewEngine(host.EngineOptions{CacheDir: wasmbuild.CompilationCacheDir(t), Logger: log.New(&strings.Builder{})})
	if err != nil {
		t.Fatal(err)
	}
	p, err := e.Load(context.Background(), host.Config{Name: t.Name(), Module: module, PluginConfig: []byte(config), Capabilities: caps, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close(context.Background()); _ = e.Close(context.Background()) })
	return p
}

type call struct {
	uri    string
	header http.Header
	ident  *route.Identity
	public bool
}

func (c call) request() *route.Request {
	path, _, _ := strings.Cut(c.uri, "?")
	h := c.header
	if h == nil {
		h = http.Header{}
	}
	return &route.Request{Method: "GET", Host: "app.tailnet.ts.net", URI: c.uri, Path: path, Header: h, Identity: c.ident, Public: c.public,
		Route: &route.Route{Host: "app.tailnet.ts.net", Path: "/", PathType: "Prefix", Backends: []route.Backend{
			{Name: "app:80", Address: "10.0.0.1:80"}, {Name: "app-canary:80", Address: "10.0.0.2:80"}}}}
}

func decide(t *testing.T, p *host.Plugin, c call) route.Decision {
	t.Helper()
	d, err := p.Route(context.Background(), c.request(), route.Decision{})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func backend(d route.Decision) string {
	if d.Backend == nil {
		return "default"
	}
	return d.Backend.Name
}

func canaryChecks(t *testing.T, p *host.Plugin, cookie bool) {
	if got := backend(decide(t, p, call{uri: "/"})); got != "default" {
		t.Errorf("plain request went to %s", got)
	}
	if got := backend(decide(t, p, call{uri: "/", header: http.Header{"X-Canary": {"always"}}})); got != "app-canary:80" {
		t.Errorf("X-Canary: always went to %s", got)
	}
	if cookie {
		if got := backend(decide(t, p, call{uri: "/", header: http.Header{"Cookie": {"a=b; canary=1"}}})); got != "app-canary:80" {
			t.Errorf("canary cookie went to %s", got)
		}
	}
}

func TestCanary(t *testing.T) {
	p := loadExample(t, wasmbuild.Go(t, "./plugins/examples/canary"),
		`{"header":"X-Canary","headerValue":"always","cookie":"canary","cookieValue":"1"}`, abi.CapRoute)
	canaryChecks(t, p, true)
}

func TestRedirectWithRegexCapture(t *testing.T) {
	p := loadExample(t, wasmbuild.Go(t, "./plugins/examples/redirect"),
		`{"rules":[{"match":"^/old/(.*)$","to":"/new/$1","status":308},{"match":"^/blog/(\\d+)$","to":"https://blog.example.com/posts/$1"}]}`)
	d := decide(t, p, call{uri: "/old/a/b?q=1"})
	if d.Action != route.Redirect || d.Status != 308 || d.Location != "/new/a/b?q=1" {
		t.Errorf("/old/a/b?q=1: %+v", d)
	}
	d = decide(t, p, call{uri: "/blog/42"})
	if d.Action != route.Redirect || d.Status != 302 || d.Location != "https://blog.example.com/posts/42" {
		t.Errorf("/blog/42: %+v", d)
	}
	if d := decide(t, p, call{uri: "/blog/x"}); d.Action != route.Forward {
		t.Errorf("/blog/x should pass: %+v", d)
	}
}

func TestIdentityAllowDeny(t *testing.T) {
	p := loadExample(t, wasmbuild.Go(t, "./plugins/examples/identity"),
		`{"rules":[{"path":"/admin/","logins":["alice@example.com"],"tags":["tag:ops"]},{"path":"/admin/public/"}]}`, abi.CapIdentity)
	alice := &route.Identity{LoginName: "alice@example.com", NodeName: "laptop"}
	bob := &route.Identity{LoginName: "bob@example.com", NodeName: "phone"}
	opsBox := &route.Identity{LoginName: "tagged-devices", NodeName: "ci", Tags: []string{"tag:ci", "tag:ops"}}
	for _, c := range []struct {
		call  call
		allow bool
	}{
		{call{uri: "/admin/users", ident: alice}, true},
		{call{uri: "/admin/users", ident: bob}, false},
		{call{uri: "/admin/users", ident: opsBox}, true},
		{call{uri: "/admin/users", public: true}, false},
		{call{uri: "/admin/public/x", ident: alice}, false}, // the longer rule lists nobody
		{call{uri: "/home", ident: bob}, true},
	} {
		d := decide(t, p, c.call)
		if allowed := d.Action == route.Forward; allowed != c.allow {
			t.Errorf("%s as %+v: %+v, want allowed=%v", c.call.uri, c.call.ident, d, c.allow)
		}
		if !c.allow && d.Status != 403 {
			t.Errorf("deny status %d, want 403", d.Status)
		}
	}
}

func TestFunnelPolicy(t *testing.T) {
	p := loadExample(t, wasmbuild.Go(t, "./plugins/examples/funnel"), `{"publicPaths":["/public/","/healthz"]}`, abi.CapFunnel)
	for _, c := range []struct {
		call call
		deny bool
	}{
		{call{uri: "/public/index.html", public: true}, false},
		{call{uri: "/healthz", public: true}, false},
		{call{uri: "/admin", public: true}, true},
		{call{uri: "/admin", ident: &route.Identity{LoginName: "a@b"}}, false},
	} {
		if d := decide(t, p, c.call); d.DenyPublic != c.deny || d.Action != route.Forward {
			t.Errorf("%s public=%v: %+v, want DenyPublic=%v", c.call.uri, c.call.public, d, c.deny)
		}
	}
}

// The AssemblyScript example, built with npm here, runs in the same host:
// http_handler redirect plus tailplane_route_v1 backend choice.
func TestAssemblyScriptGuest(t *testing.T) {
	module := wasmbuild.AssemblyScript(t)
	if len(module) > 64<<10 {
		t.Errorf("the AssemblyScript module is %d bytes; expected a few KB", len(module))
	}
	p := loadExample(t, module, ``, abi.CapRoute)
	canaryChecks(t, p, false)
	d := decide(t, p, call{uri: "/old/x?y=1"})
	if d.Action != route.Redirect || d.Status != 308 || d.Location != "/new/x?y=1" {
		t.Errorf("/old/x?y=1: %+v", d)
	}
}
