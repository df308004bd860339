package proxy

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"tailscale.com/tsnet"

	"github.com/tailplane/tailplane/internal/tailnettest"
	"github.com/tailplane/tailplane/internal/testpoll"
	"github.com/tailplane/tailplane/proxy/config"
	"github.com/tailplane/tailplane/proxy/l7"
	"github.com/tailplane/tailplane/proxy/route"
)

// vipHTTP is a plain HTTP client (h2c with prior knowledge when h2c is
// set) that reaches addr over the tailnet from client, counting its dials.
func vipHTTP(client *tsnet.Server, addr netip.AddrPort, dials *atomic.Int32, h2c bool) *http.Client {
	tr := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		if dials != nil {
			dials.Add(1)
		}
		return dialOverTailnet(ctx, client, "tcp", addr)
	}}
	if h2c {
		tr.Protocols = new(http.Protocols)
		tr.Protocols.SetUnencryptedHTTP2(true)
	}
	return &http.Client{Transport: tr, Timeout: 10 * time.Second}
}

// getBackend GETs url and returns the echo backend's answer, or why not.
func getBackend(c *http.Client, url string) (echoed, *http.Response, error) {
	resp, body, err := get(c, url, nil)
	if err != nil {
		return echoed{}, nil, err
	}
	var e echoed
	if resp.StatusCode != http.StatusOK {
		return e, resp, fmt.Errorf("status %d, body %q", resp.StatusCode, body)
	}
	if err := json.Unmarshal(body, &e); err != nil {
		return e, resp, fmt.Errorf("%q: %w", body, err)
	}
	return e, resp, nil
}

// A Gateway Tailscale Service on a two-replica group is served on the
// service's addresses as the gateway role serves a Gateway on the node's:
// the HTTP listener routes by path (with the rule's plugin, identity
// headers, metrics by rule name, h2c) and splits by weight, the HTTPS
// listener serves the shared certificate that replica 0 issued, a TCP
// listener forwards; both replicas advertise the service and either
// serves it; a change of the routes is served on the connection opened
// before it (the listener stays open); removing the service withdraws it.
func TestGroupGatewayService(t *testing.T) {
	ns := env.Namespace(t)
	cs := env.Clientset(t)
	tn := tailnettest.New(t)
	domain := tailnettest.FQDN("gw")
	emptyTLSSecret(t, cs, ns, "gw-tls")
	api, web, canary := echoBackend(t, "api"), echoBackend(t, "web"), echoBackend(t, "canary")
	tcpLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tcpHalfCloseServer(t, tcpLn)
	httpRoutes := func(apiTo config.Backend) []config.HTTPRoute {
		return []config.HTTPRoute{
			{Name: "ns/api/0", Match: config.HTTPMatch{PathType: config.MatchPathPrefix, Path: "/api"}, Backends: weighted(apiTo),
				Plugins: []config.Plugin{{Name: "ns/tagger"}}},
			{Name: "ns/split/0", Match: config.HTTPMatch{PathType: config.MatchPathPrefix, Path: "/split"},
				Backends: []config.WeightedBackend{{Backend: backendOf("api", api), Weight: 1}, {Backend: backendOf("canary", canary), Weight: 1}}},
			{Name: "ns/web/0", Backends: weighted(backendOf("web", web))},
		}
	}
	service := func(apiTo config.Backend) config.Service {
		return config.Service{Name: "svc:gw", Gateway: &config.Gateway{Listeners: []config.Listener{
			{Name: "http", Port: gatewayHTTPPort, Protocol: config.ListenerHTTP, HTTPRoutes: httpRoutes(apiTo)},
			{Name: "https", Port: 443, Protocol: config.ListenerHTTPS, TLS: &config.TLS{Mode: config.TLSShared, SecretName: "gw-tls"},
				HTTPRoutes: []config.HTTPRoute{{Name: "ns/secure/0", Backends: weighted(backendOf("web", web))}}},
			{Name: "db", Port: 5432, Protocol: config.ListenerTCP, Backends: weighted(config.Backend{Service: "db", Address: tcpLn.Addr().String()})},
		}}}
	}
	groupCfg := func(hostname string, replica int, svcs ...config.Service) *config.Config {
		cfg := newConfig(tn, hostname, config.RoleIngressGroup)
		cfg.Group = &config.Group{}
		for _, s := range svcs {
			cfg.Group.Services = append(cfg.Group.Services, s.Issuing(replica == 0))
		}
		return cfg
	}
	// The plugin host runs the rule's plugin for that rule only.
	plugins := func(context.Context, []config.Plugin) ([]route.Router, error) {
		return []route.Router{&pluginHost{}}, nil
	}
	ca := newTestCA(t)
	var issued atomic.Int32
	opts := func() Options {
		return Options{Kube: cs, Namespace: ns, PluginRouters: plugins,
			IssueCert: func(_ context.Context, d string) ([]byte, []byte, error) {
				if d != domain {
					return nil, nil, fmt.Errorf("asked for %q, want %q", d, domain)
				}
				issued.Add(1)
				crt, key, _, err := ca.issue(d, 90*24*time.Hour)
				return crt, key, err
			}}
	}
	r0 := startEngine(t, tn, groupCfg("pg-0", 0, service(backendOf("api", api))), opts())
	r1 := start(t, tn, groupCfg("pg-1", 1, service(backendOf("api", api))), opts())
	testpoll.UntilTrue(t, 60*time.Second, "pg-0 logged in with its config applied", func() bool {
		return r0.engine.loggedIn.Load() && r0.engine.active.Load()
	})
	replicas := []*running{r0, r1}
	waitServices(t, r0.engine.Node(), "svc:gw")
	// pg-1 advertises once pg-0 wrote the certificate into the Secret.
	waitServices(t, r1.engine.Node(), "svc:gw")
	if n := issued.Load(); n != 1 {
		t.Errorf("the certificate was issued %d times, want 1 (by replica 0)", n)
	}

	// Each replica serves the service when control routes it there.
	addrs := vipAddrs(9)
	for _, r := range []*running{r1, r0} {
		other := r0
		if r == r0 {
			other = r1
		}
		hostServices(t, tn, other.engine.Node(), nil)
		hostServices(t, tn, r.engine.Node(), map[string][]netip.Addr{"svc:gw": addrs})
		hc := vipHTTP(r1.client, netip.AddrPortFrom(addrs[0], gatewayHTTPPort), nil, false)
		testpoll.Until(t, 20*time.Second, "HTTP /api of svc:gw on "+r.engine.Node().Hostname, func() error {
			e, resp, err := getBackend(hc, "http://"+domain+fmt.Sprintf(":%d/api/users", gatewayHTTPPort))
			if err != nil {
				return err
			}
			if e.Backend != "api" || resp.Header.Get("X-Plugins") != "ns/tagger" {
				return fmt.Errorf("backend %q, X-Plugins %q", e.Backend, resp.Header.Get("X-Plugins"))
			}
			return nil
		})
		for _, a := range addrs {
			sc := vipHTTPS(r1.client, netip.AddrPortFrom(a, 443), ca.roots)
			testpoll.Until(t, 20*time.Second, "HTTPS to svc:gw on "+a.String(), func() error {
				e, resp, err := getBackend(sc, "https://"+domain+"/secure")
				if err != nil {
					return err
				}
				if e.Backend != "web" || resp.ProtoMajor != 2 || e.Header.Get(l7.HeaderUserLogin) == "" {
					return fmt.Errorf("backend %q over %s, identity %q", e.Backend, resp.Proto, e.Header.Get(l7.HeaderUserLogin))
				}
				return nil
			})
		}
		testpoll.Until(t, 20*time.Second, "TCP to svc:gw", func() error {
			return tcpOverTailnet(r1.client, netip.AddrPortFrom(addrs[1], 5432), 5*time.Second)
		})
	}

	// pg-0 serves from here on: routing by path, the split, h2c, metrics.
	var dials atomic.Int32
	c := vipHTTP(r1.client, netip.AddrPortFrom(addrs[0], gatewayHTTPPort), &dials, false)
	url := func(path string) string { return fmt.Sprintf("http://%s:%d%s", domain, gatewayHTTPPort, path) }
	if e, resp, err := getBackend(c, url("/other")); err != nil || e.Backend != "web" || resp.Header.Get("X-Plugins") != "" {
		t.Errorf("/other: backend %q (%v); want web without the api rule's plugin", e.Backend, err)
	}
	seen := map[string]int{}
	for range 40 {
		e, _, err := getBackend(c, url("/split"))
		if err != nil {
			t.Fatal(err)
		}
		seen[e.Backend]++
	}
	if seen["api"] == 0 || seen["canary"] == 0 || seen["api"]+seen["canary"] != 40 {
		t.Errorf("the 1:1 split answered %v, want both api and canary", seen)
	}
	if _, resp, err := getBackend(vipHTTP(r1.client, netip.AddrPortFrom(addrs[0], gatewayHTTPPort), nil, true), url("/api/x")); err != nil || resp.ProtoMajor != 2 {
		t.Errorf("h2c on the HTTP listener: %v", err)
	}
	if got := gaugeValue(t, r0.engine, "tailplane_proxy_requests_total", "ns/split/0"); got < 40 {
		t.Errorf("requests of ns/split/0 counted %v, want the rule's name as the route label", got)
	}

	// A change of the routes, on the keep-alive connection opened before.
	before := dials.Load()
	for i, r := range replicas {
		writeConfig(t, r.cfgPath, groupCfg(fmt.Sprintf("pg-%d", i), i, service(backendOf("canary", canary))))
	}
	testpoll.Until(t, 20*time.Second, "/api moves to canary", func() error {
		e, _, err := getBackend(c, url("/api/users"))
		if err != nil {
			return err
		}
		if e.Backend != "canary" {
			return fmt.Errorf("still %q", e.Backend)
		}
		return nil
	})
	if after := dials.Load(); after != before {
		t.Errorf("the client dialled %d times during the reload, want 0: the listener dropped its connection", after-before)
	}
	waitServices(t, r0.engine.Node(), "svc:gw")

	// Removing the service withdraws it and closes its ports, even while
	// control still routes its addresses here.
	for i, r := range replicas {
		writeConfig(t, r.cfgPath, groupCfg(fmt.Sprintf("pg-%d", i), i))
	}
	waitServices(t, r0.engine.Node())
	waitServices(t, r1.engine.Node())
	testpoll.Until(t, 20*time.Second, "svc:gw stops answering", func() error {
		if _, _, err := getBackend(vipHTTP(r1.client, netip.AddrPortFrom(addrs[0], gatewayHTTPPort), nil, false), url("/api")); err == nil {
			return fmt.Errorf("still answers")
		}
		return nil
	})
	if err := tcpOverTailnet(r1.client, netip.AddrPortFrom(addrs[0], 5432), 3*time.Second); err == nil {
		t.Error("svc:gw's TCP listener still answers after the service left the config")
	}
}
