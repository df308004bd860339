package proxy

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"tailscale.com/ipn/store/mem"

	"github.com/tailplane/tailplane/proxy/config"
	"github.com/tailplane/tailplane/proxy/configwatch"
	"github.com/tailplane/tailplane/proxy/route"
)

// pluginHost stands in for the WASM plugin host: one router for the
// replica that can run a subset of its plugins (plugins.Manager.Only).
type pluginHost struct{ applied []string }

func (h *pluginHost) Route(ctx context.Context, req *route.Request, d route.Decision) (route.Decision, error) {
	return h.Only(h.applied).Route(ctx, req, d)
}

func (h *pluginHost) Only(names []string) route.Router {
	return route.RouterFunc(func(_ context.Context, _ *route.Request, d route.Decision) (route.Decision, error) {
		d.SetResponseHeaders = http.Header{"X-Plugins": {strings.Join(names, ",")}}
		return d, nil
	})
}

// Each Tailscale Service of a replica runs its own routing plugins: the
// plugin host gets the union once, every service runs its own part, a
// service without plugins runs none, and a service naming a plugin with
// another spec than the one already in use is not served.
func TestGroupServicesRunTheirOwnPlugins(t *testing.T) {
	host := &pluginHost{}
	e, err := New(Options{Source: &configwatch.File{Path: "unused"}, State: new(mem.Store), StateDir: t.TempDir(), Logger: testLogger(t),
		PluginRouters: func(_ context.Context, ps []config.Plugin) ([]route.Router, error) {
			host.applied = nil
			for _, p := range ps {
				host.applied = append(host.applied, p.Name)
			}
			return []route.Router{host}, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	plugin := func(name, spec string) config.Plugin { return config.Plugin{Name: name, Spec: json.RawMessage(spec)} }
	l7 := func() *config.L7 {
		return &config.L7{TLS: config.TLS{Mode: config.TLSShared, SecretName: "s"}, DefaultBackend: &config.Backend{Service: "b", Address: "127.0.0.1:1"}}
	}
	cfg := &config.Config{Role: config.RoleIngressGroup, Group: &config.Group{Services: []config.Service{
		{Name: "svc:a", L7: l7(), Plugins: []config.Plugin{plugin("ns/p1", `{"x":1}`)}},
		{Name: "svc:b", L7: l7(), Plugins: []config.Plugin{plugin("ns/p2", `{}`), plugin("ns/p1", `{"x":1}`)}},
		{Name: "svc:c", L7: l7()},
		{Name: "svc:d", L7: l7(), Plugins: []config.Plugin{plugin("ns/p1", `{"x":2}`)}},
	}}}
	p, err := e.planGroup(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(host.applied, []string{"ns/p1", "ns/p2"}) {
		t.Errorf("plugin host got %v, want the union [ns/p1 ns/p2]", host.applied)
	}
	ran := func(svc string) (string, error) {
		r, ok := p.routes[svc]
		if !ok {
			return "", fmt.Errorf("%s has no routes (error %v)", svc, p.errs[svc])
		}
		d, err := r.Routers.Route(context.Background(), &route.Request{Method: "GET", Host: "h", URI: "/", Path: "/", Header: http.Header{}}, route.Decision{})
		return d.SetResponseHeaders.Get("X-Plugins"), err
	}
	for svc, want := range map[string]string{"svc:a": "ns/p1", "svc:b": "ns/p2,ns/p1", "svc:c": ""} {
		if got, err := ran(svc); err != nil || got != want {
			t.Errorf("%s ran plugins %q (%v), want %q", svc, got, err, want)
		}
	}
	if err := p.errs["svc:d"]; err == nil || !strings.Contains(err.Error(), `plugins: "ns/p1" differs from the plugin of that name in svc:a`) {
		t.Errorf("svc:d: error %v", err)
	}
}
