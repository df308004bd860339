package config

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// validGateway is a gateway section using every kind of listener and
// filter; each rejection case below breaks one thing in a copy of it.
func validGateway() *Gateway {
	be := WeightedBackend{Backend: Backend{Service: "ns/web:80", Address: "10.0.0.2:80"}, Weight: 1}
	return &Gateway{Listeners: []Listener{
		{Name: "http", Port: 80, Protocol: ListenerHTTP, HTTPRoutes: []HTTPRoute{
			{Name: "ns/web/0", Hostnames: []string{"app.example.com", "*.example.com"},
				Match: HTTPMatch{PathType: MatchPathPrefix, Path: "/api", Method: "GET",
					Headers:     []ValueMatch{{Name: "x-env", Value: "canary"}, {Name: "x-id", Regex: true, Value: "[0-9]+"}},
					QueryParams: []ValueMatch{{Name: "v", Value: "2"}}},
				Filters: HTTPFilters{
					RequestHeaders:  &HeaderModifier{Set: []Header{{Name: "x-a", Value: "1"}}, Add: []Header{{Name: "x-b", Value: "2"}}, Remove: []string{"x-c"}},
					ResponseHeaders: &HeaderModifier{Set: []Header{{Name: "x-d", Value: "1"}}},
					Rewrite:         &Rewrite{Hostname: "internal.example.com", Path: &PathModifier{Type: ReplacePrefixMatch, Value: "/"}},
					Mirrors:         []Mirror{{Backend: Backend{Service: "ns/shadow:80", Address: "10.0.0.9:80"}, Percent: 10}},
				},
				Backends:             []WeightedBackend{be, {Backend: Backend{Service: "ns/gone:80"}, Weight: 1, Invalid: true}},
				RequestTimeoutMillis: 5000, BackendTimeoutMillis: 1000},
			{Name: "ns/redirect/0", Match: HTTPMatch{PathType: MatchRegularExpression, Path: "/old/.*"},
				Filters: HTTPFilters{Redirect: &Redirect{Scheme: "https", StatusCode: 301, Path: &PathModifier{Type: ReplaceFullPath, Value: "/new"}}}},
		}},
		{Name: "https", Port: 443, Protocol: ListenerHTTPS, Hostname: "app.example.com", TLS: &TLS{Mode: TLSSecret, SecretName: "app-tls"},
			HTTPRoutes: []HTTPRoute{{Name: "ns/grpc/0", Match: HTTPMatch{PathType: MatchExact, Path: "/pkg.Svc/Get"},
				Backends: []WeightedBackend{{Backend: Backend{Service: "ns/grpc:50051", Address: "10.0.0.3:50051", H2C: true}, Weight: 1}}}}},
		{Name: "https-node", Port: 443, Protocol: ListenerHTTPS, Hostname: "gw.tail.ts.net", TLS: &TLS{}},
		{Name: "tls", Port: 8443, Protocol: ListenerTLS, TLSRoutes: []TLSRoute{{Name: "ns/db/0", Hostnames: []string{"db.example.com"}, Backends: []WeightedBackend{be}}}},
		{Name: "tcp", Port: 5432, Protocol: ListenerTCP, Backends: []WeightedBackend{be}},
		{Name: "udp", Port: 5432, Protocol: ListenerUDP, Backends: []WeightedBackend{be}},
	}}
}

func gatewayErrors(g *Gateway) string {
	var msgs []string
	g.validate(func(field, format string, args ...any) {
		msgs = append(msgs, field+": "+fmt.Sprintf(format, args...))
	})
	return strings.Join(msgs, "\n")
}

func TestGatewayValid(t *testing.T) {
	if errs := gatewayErrors(validGateway()); errs != "" {
		t.Fatalf("valid gateway refused:\n%s", errs)
	}
	// And through Parse, as the operator's document arrives.
	cfg := Config{Version: Version, Hostname: "gw", Role: RoleGateway, Gateway: validGateway()}
	doc, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Parse(doc); err != nil {
		t.Fatalf("valid gateway document refused: %v", err)
	}
}

func TestGatewayRejects(t *testing.T) {
	cases := []struct {
		name   string
		breaks func(g *Gateway)
		want   string
	}{
		{"no listeners", func(g *Gateway) { g.Listeners = nil }, "gateway.listeners: at least one listener is required"},
		{"bad port", func(g *Gateway) { g.Listeners[4].Port = 0 }, "gateway.listeners[4].port: bad port 0"},
		{"unknown protocol", func(g *Gateway) { g.Listeners[4].Protocol = "SCTP" }, `gateway.listeners[4].protocol: unknown protocol "SCTP"`},
		{"mixed protocols on a port", func(g *Gateway) { g.Listeners[3].Port = 443 }, "gateway.listeners[3].protocol: TLS on port 443, where gateway.listeners[1] is HTTPS"},
		{"same hostname on a port", func(g *Gateway) { g.Listeners[2].Hostname = "APP.example.com" }, `gateway.listeners[2].hostname: "APP.example.com" on port 443 is also gateway.listeners[1]'s`},
		{"two TCP listeners on a port", func(g *Gateway) {
			g.Listeners = append(g.Listeners, Listener{Name: "tcp2", Port: 5432, Protocol: ListenerTCP})
		}, "gateway.listeners[6].port: TCP port 5432 is also gateway.listeners[4]'s"},
		{"HTTPS without TLS", func(g *Gateway) { g.Listeners[1].TLS = nil }, "gateway.listeners[1].tls: is required for HTTPS"},
		{"secret without name", func(g *Gateway) { g.Listeners[1].TLS.SecretName = "" }, `gateway.listeners[1].tls.secretName: is required for mode "secret"`},
		{"files mode", func(g *Gateway) { g.Listeners[1].TLS.Mode = TLSFiles }, `gateway.listeners[1].tls.mode: unknown gateway TLS mode "files"`},
		{"bad listener hostname", func(g *Gateway) { g.Listeners[0].Hostname = "a.*.com" }, `gateway.listeners[0].hostname: "a.*.com" is not a host name`},
		{"hostname on TCP", func(g *Gateway) { g.Listeners[4].Hostname = "db.example.com" }, "gateway.listeners[4].hostname: TCP listeners have no hostname"},
		{"funnel on HTTP", func(g *Gateway) { g.Listeners[0].Funnel = true }, "gateway.listeners[0].funnel: only HTTPS listeners"},
		{"funnel on another port", func(g *Gateway) { g.Listeners[1].Funnel, g.Listeners[1].Port, g.Listeners[2].Port = true, 4443, 4443 }, "gateway.listeners[1].funnel: Funnel offers ports 443, 8443 and 10000, not 4443"},
		{"HTTP routes on TCP", func(g *Gateway) { g.Listeners[4].HTTPRoutes = g.Listeners[0].HTTPRoutes }, "gateway.listeners[4].httpRoutes: TCP listeners serve no HTTP routes"},
		{"TLS routes on HTTP", func(g *Gateway) { g.Listeners[0].TLSRoutes = g.Listeners[3].TLSRoutes }, "gateway.listeners[0].tlsRoutes: HTTP listeners serve no TLS routes"},
		{"backends on TLS", func(g *Gateway) { g.Listeners[3].Backends = g.Listeners[4].Backends }, "gateway.listeners[3].backends: TLS listeners route by their routes"},
		{"bad route hostname", func(g *Gateway) { g.Listeners[0].HTTPRoutes[0].Hostnames[1] = "*" }, `gateway.listeners[0].httpRoutes[0].hostnames[1]: "*" is not a host name`},
		{"unknown path type", func(g *Gateway) { g.Listeners[0].HTTPRoutes[0].Match.PathType = "Prefix" }, `gateway.listeners[0].httpRoutes[0].match.pathType: unknown path match type "Prefix"`},
		{"relative path", func(g *Gateway) { g.Listeners[1].HTTPRoutes[0].Match.Path = "pkg.Svc/Get" }, `gateway.listeners[1].httpRoutes[0].match.path: "pkg.Svc/Get" must start with "/"`},
		{"bad path regex", func(g *Gateway) { g.Listeners[0].HTTPRoutes[1].Match.Path = "/(a" }, "gateway.listeners[0].httpRoutes[1].match.path: not an RE2 expression"},
		{"lookahead is not RE2", func(g *Gateway) { g.Listeners[0].HTTPRoutes[1].Match.Path = "/(?=a)" }, "gateway.listeners[0].httpRoutes[1].match.path: not an RE2 expression"},
		{"empty header name", func(g *Gateway) { g.Listeners[0].HTTPRoutes[0].Match.Headers[0].Name = "" }, "gateway.listeners[0].httpRoutes[0].match.headers[0].name: must not be empty"},
		{"bad header regex", func(g *Gateway) { g.Listeners[0].HTTPRoutes[0].Match.Headers[1].Value = "[" }, "gateway.listeners[0].httpRoutes[0].match.headers[1].value: not an RE2 expression"},
		{"empty query name", func(g *Gateway) { g.Listeners[0].HTTPRoutes[0].Match.QueryParams[0].Name = "" }, "gateway.listeners[0].httpRoutes[0].match.queryParams[0].name: must not be empty"},
		{"unknown method", func(g *Gateway) { g.Listeners[0].HTTPRoutes[0].Match.Method = "get" }, `gateway.listeners[0].httpRoutes[0].match.method: unknown method "get"`},
		{"negative weight", func(g *Gateway) { g.Listeners[0].HTTPRoutes[0].Backends[0].Weight = -1 }, "gateway.listeners[0].httpRoutes[0].backends[0].weight: must not be negative"},
		{"bad backend address", func(g *Gateway) { g.Listeners[4].Backends[0].Address = "db host:5432" }, "gateway.listeners[4].backends[0].address:"},
		{"negative timeout", func(g *Gateway) { g.Listeners[0].HTTPRoutes[0].RequestTimeoutMillis = -1 }, "gateway.listeners[0].httpRoutes[0].requestTimeoutMillis: must not be negative"},
		{"negative backend timeout", func(g *Gateway) { g.Listeners[0].HTTPRoutes[0].BackendTimeoutMillis = -5 }, "gateway.listeners[0].httpRoutes[0].backendTimeoutMillis: must not be negative"},
		{"redirect code", func(g *Gateway) { g.Listeners[0].HTTPRoutes[1].Filters.Redirect.StatusCode = 200 }, "gateway.listeners[0].httpRoutes[1].filters.redirect.statusCode: 200 is not a redirect code"},
		{"redirect scheme", func(g *Gateway) { g.Listeners[0].HTTPRoutes[1].Filters.Redirect.Scheme = "ftp" }, `gateway.listeners[0].httpRoutes[1].filters.redirect.scheme: unknown scheme "ftp"`},
		{"redirect port", func(g *Gateway) { g.Listeners[0].HTTPRoutes[1].Filters.Redirect.Port = 70000 }, "gateway.listeners[0].httpRoutes[1].filters.redirect.port: bad port 70000"},
		{"path modifier type", func(g *Gateway) { g.Listeners[0].HTTPRoutes[1].Filters.Redirect.Path.Type = "Replace" }, `gateway.listeners[0].httpRoutes[1].filters.redirect.path.type: unknown path modifier "Replace"`},
		{"prefix replace on a regex match", func(g *Gateway) { g.Listeners[0].HTTPRoutes[1].Filters.Redirect.Path.Type = ReplacePrefixMatch }, "gateway.listeners[0].httpRoutes[1].filters.redirect.path.type: ReplacePrefixMatch needs a PathPrefix match"},
		{"prefix replace on an exact match", func(g *Gateway) {
			g.Listeners[1].HTTPRoutes[0].Filters.Rewrite = &Rewrite{Path: &PathModifier{Type: ReplacePrefixMatch, Value: "/"}}
		}, "gateway.listeners[1].httpRoutes[0].filters.rewrite.path.type: ReplacePrefixMatch needs a PathPrefix match"},
		{"rewrite hostname wildcard", func(g *Gateway) { g.Listeners[0].HTTPRoutes[0].Filters.Rewrite.Hostname = "*.example.com" }, `gateway.listeners[0].httpRoutes[0].filters.rewrite.hostname: "*.example.com" is not a host name`},
		{"redirect with rewrite", func(g *Gateway) { g.Listeners[0].HTTPRoutes[1].Filters.Rewrite = &Rewrite{Hostname: "a.example.com"} }, "gateway.listeners[0].httpRoutes[1].filters: redirect and rewrite exclude each other"},
		{"empty header to set", func(g *Gateway) { g.Listeners[0].HTTPRoutes[0].Filters.RequestHeaders.Set[0].Name = "" }, "gateway.listeners[0].httpRoutes[0].filters.requestHeaders.set[0].name: must not be empty"},
		{"empty header to remove", func(g *Gateway) { g.Listeners[0].HTTPRoutes[0].Filters.RequestHeaders.Remove[0] = "" }, "gateway.listeners[0].httpRoutes[0].filters.requestHeaders.remove[0]: must not be empty"},
		{"mirror percent", func(g *Gateway) { g.Listeners[0].HTTPRoutes[0].Filters.Mirrors[0].Percent = 101 }, "gateway.listeners[0].httpRoutes[0].filters.mirrors[0].percent: 101 is not a percentage"},
		{"https and h2c", func(g *Gateway) { g.Listeners[1].HTTPRoutes[0].Backends[0].HTTPS = true }, "gateway.listeners[1].httpRoutes[0].backends[0]: https and h2c exclude each other"},
		{"route without name", func(g *Gateway) { g.Listeners[3].TLSRoutes[0].Name = "" }, "gateway.listeners[3].tlsRoutes[0].name: must not be empty"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := validGateway()
			tc.breaks(g)
			if errs := gatewayErrors(g); !strings.Contains(errs, tc.want) {
				t.Errorf("errors:\n%s\nwant one containing %q", errs, tc.want)
			}
		})
	}
}

// TLS mode shared is a Tailscale Service's certificate: a Gateway service
// of the group section serves it on its HTTPS listeners, and the gateway
// role, which has no Tailscale Service, refuses it.
func TestGatewaySharedCertificate(t *testing.T) {
	shared := func() *Gateway {
		g := validGateway()
		g.Listeners = g.Listeners[:2]
		g.Listeners[1].TLS = &TLS{Mode: TLSShared, SecretName: "gw-tls"}
		return g
	}
	group := Config{Version: Version, Hostname: "pg-0", Role: RoleIngressGroup,
		Group: &Group{Services: []Service{{Name: "svc:gw", Gateway: shared()}}}}
	doc, err := json.Marshal(group)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Parse(doc); err != nil {
		t.Fatalf("Gateway service with the shared certificate refused: %v", err)
	}
	role := Config{Version: Version, Hostname: "gw", Role: RoleGateway, Gateway: shared()}
	if doc, err = json.Marshal(role); err != nil {
		t.Fatal(err)
	}
	if _, err := Parse(doc); err == nil || !strings.Contains(err.Error(), `gateway.listeners[1].tls.mode: mode "shared" is for Tailscale Services`) {
		t.Errorf("gateway role with the shared certificate: %v", err)
	}
}
