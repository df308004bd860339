package gatewayapi

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	"sigs.k8s.io/yaml"

	"github.com/tailplane/tailplane/handlers/lib/proxyset"
	"github.com/tailplane/tailplane/proxy/config"
)

// cluster is a fake cluster for Lookups: Services, Secrets and namespace
// labels by "namespace/name".
type fakeCluster struct {
	services   map[string]*corev1.Service
	secrets    map[string]*corev1.Secret
	namespaces map[string]map[string]string
}

func (c *fakeCluster) lookups() Lookups {
	return Lookups{
		Service: func(ns, name string) (*corev1.Service, error) { return c.services[ns+"/"+name], nil },
		Secret:  func(ns, name string) (*corev1.Secret, error) { return c.secrets[ns+"/"+name], nil },
		NamespaceLabels: func(name string) (map[string]string, error) {
			return c.namespaces[name], nil
		},
		Plugin: func(ns, name string) (config.Plugin, string, bool, error) {
			if name == "canary" {
				return config.Plugin{Name: ns + "/" + name}, "tp-plugin-chunk", true, nil
			}
			return config.Plugin{}, "", false, nil
		},
	}
}

func service(ns, name, ip string, port int32, appProtocol string) *corev1.Service {
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.ServiceSpec{ClusterIP: ip, Ports: []corev1.ServicePort{{Port: port}}}}
	if appProtocol != "" {
		svc.Spec.Ports[0].AppProtocol = &appProtocol
	}
	return svc
}

func newCluster() *fakeCluster {
	return &fakeCluster{
		services: map[string]*corev1.Service{
			"default/web":    service("default", "web", "10.0.0.1", 8080, ""),
			"default/canary": service("default", "canary", "10.0.0.2", 8080, ""),
			"default/grpc":   service("default", "grpc", "10.0.0.3", 9000, ""),
			"other/api":      service("other", "api", "10.0.0.4", 80, AppProtocolH2C),
		},
		secrets:    map[string]*corev1.Secret{},
		namespaces: map[string]map[string]string{"default": {"env": "prod"}, "other": {"env": "dev"}},
	}
}

func gatewayFrom(t *testing.T, doc string) *gatewayv1.Gateway {
	t.Helper()
	var gw gatewayv1.Gateway
	if err := yaml.UnmarshalStrict([]byte(doc), &gw); err != nil {
		t.Fatal(err)
	}
	return &gw
}

func routeFrom(t *testing.T, kind, doc string) *Route {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
		t.Fatal(err)
	}
	r, err := DecodeRoute(kind, u)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

const plainGateway = `
metadata: {namespace: default, name: gw, generation: 3}
spec:
  gatewayClassName: tailscale
  listeners:
  - {name: http, port: 80, protocol: HTTP, allowedRoutes: {namespaces: {from: All}}}
`

func render(t *testing.T, gw *gatewayv1.Gateway, c *fakeCluster, grants []gatewayv1.ReferenceGrant, routes ...*Route) *Result {
	t.Helper()
	res, err := Render(gw, Inputs{Routes: routes, Grants: grants, Lookups: c.lookups(),
		CertificateName: func(l string) string { return "copy-" + l }})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// condition returns the condition of type t of a route's only parent
// entry.
func routeCondition(t *testing.T, res *Result, r *Route, typ string) metav1.Condition {
	t.Helper()
	parents := res.Parents[r.Key()]
	if len(parents) != 1 {
		t.Fatalf("%s has %d parent entries, want 1: %+v", r.Key(), len(parents), parents)
	}
	for _, c := range parents[0].Conditions {
		if c.Type == typ {
			return c
		}
	}
	t.Fatalf("%s has no %s condition", r.Key(), typ)
	return metav1.Condition{}
}

func TestRenderWeightedCanaryAndPrecedence(t *testing.T) {
	gw := gatewayFrom(t, plainGateway)
	older := routeFrom(t, KindHTTPRoute, `
metadata: {namespace: default, name: app, generation: 2, creationTimestamp: "2026-01-01T00:00:00Z"}
spec:
  parentRefs: [{name: gw}]
  rules:
  - backendRefs: [{name: web, port: 8080, weight: 90}, {name: canary, port: 8080, weight: 10}]
  - matches: [{path: {type: Exact, value: /healthz}}]
    backendRefs: [{name: web, port: 8080}]
  - matches: [{path: {type: PathPrefix, value: /api}, headers: [{name: x-env, value: test}]}]
    filters: [{type: RequestHeaderModifier, requestHeaderModifier: {set: [{name: x-a, value: b}], remove: [x-secret]}}]
    backendRefs: [{name: web, port: 8080}]
`)
	res := render(t, gw, newCluster(), nil, older)
	if res.Config == nil || len(res.Config.Listeners) != 1 {
		t.Fatalf("config: %+v", res.Config)
	}
	entries := res.Config.Listeners[0].HTTPRoutes
	var order []string
	for _, e := range entries {
		order = append(order, string(e.Match.PathType)+" "+e.Match.Path)
	}
	if got, want := strings.Join(order, ", "), "Exact /healthz, PathPrefix /api, PathPrefix /"; got != want {
		t.Errorf("precedence order = %s, want %s", got, want)
	}
	canary := entries[2].Backends
	if len(canary) != 2 || canary[0].Weight != 90 || canary[1].Weight != 10 || canary[1].Address != "10.0.0.2:8080" {
		t.Errorf("weighted backends = %+v", canary)
	}
	if h := entries[1].Filters.RequestHeaders; h == nil || h.Set[0].Name != "x-a" || h.Remove[0] != "x-secret" {
		t.Errorf("request header modifier = %+v", h)
	}
	if c := routeCondition(t, res, older, "Accepted"); c.Status != metav1.ConditionTrue || c.ObservedGeneration != 2 {
		t.Errorf("Accepted = %+v", c)
	}
	st := Status(gw, res, Proxy{Programmed: true, Device: proxyset.Device{FQDN: "default-gw-gateway.ts.net", IPs: []string{"fd7a::1", "100.64.0.9"}}})
	if st.Listeners[0].AttachedRoutes != 1 {
		t.Errorf("attachedRoutes = %d, want 1", st.Listeners[0].AttachedRoutes)
	}
	if st.Addresses[0].Value != "100.64.0.9" || st.Addresses[2].Value != "default-gw-gateway.ts.net" {
		t.Errorf("addresses = %+v, want IPv4 first and the MagicDNS name last", st.Addresses)
	}
	var types []string
	for _, c := range st.Listeners[0].Conditions {
		types = append(types, c.Type+"="+string(c.Status))
	}
	if got := strings.Join(types, " "); got != "Accepted=True Programmed=True ResolvedRefs=True Conflicted=False" {
		t.Errorf("listener conditions = %s", got)
	}
}

func TestRenderReferences(t *testing.T) {
	gw := gatewayFrom(t, plainGateway)
	cross := routeFrom(t, KindHTTPRoute, `
metadata: {namespace: default, name: cross}
spec:
  parentRefs: [{name: gw}]
  rules: [{backendRefs: [{name: api, namespace: other, port: 80}]}]
`)
	missing := routeFrom(t, KindHTTPRoute, `
metadata: {namespace: default, name: missing}
spec:
  parentRefs: [{name: gw}]
  rules: [{backendRefs: [{name: nope, port: 80}]}]
`)
	res := render(t, gw, newCluster(), nil, cross, missing)
	if c := routeCondition(t, res, cross, "ResolvedRefs"); c.Status != metav1.ConditionFalse || c.Reason != "RefNotPermitted" {
		t.Errorf("cross-namespace without a grant: %+v", c)
	}
	if c := routeCondition(t, res, missing, "ResolvedRefs"); c.Status != metav1.ConditionFalse || c.Reason != "BackendNotFound" {
		t.Errorf("missing Service: %+v", c)
	}
	for _, e := range res.Config.Listeners[0].HTTPRoutes {
		if !e.Backends[0].Invalid || e.Backends[0].Address != "" {
			t.Errorf("%s: unresolved backend must stay, Invalid (answered 500): %+v", e.Name, e.Backends)
		}
	}
	grant := gatewayv1.ReferenceGrant{ObjectMeta: metav1.ObjectMeta{Namespace: "other", Name: "g"}, Spec: gatewayv1.ReferenceGrantSpec{
		From: []gatewayv1.ReferenceGrantFrom{{Group: Group, Kind: KindHTTPRoute, Namespace: "default"}},
		To:   []gatewayv1.ReferenceGrantTo{{Group: "", Kind: "Service"}}}}
	res = render(t, gw, newCluster(), []gatewayv1.ReferenceGrant{grant}, cross)
	if c := routeCondition(t, res, cross, "ResolvedRefs"); c.Status != metav1.ConditionTrue {
		t.Errorf("with a grant: %+v", c)
	}
	b := res.Config.Listeners[0].HTTPRoutes[0].Backends[0]
	if b.Invalid || b.Address != "10.0.0.4:80" || !b.H2C {
		t.Errorf("granted backend = %+v, want 10.0.0.4:80 over h2c (appProtocol)", b)
	}
}

func TestRenderAttachment(t *testing.T) {
	gw := gatewayFrom(t, `
metadata: {namespace: default, name: gw}
spec:
  gatewayClassName: tailscale
  listeners:
  - {name: wild, port: 80, protocol: HTTP, hostname: "*.example.com"}
  - {name: prod, port: 8080, protocol: HTTP, allowedRoutes: {namespaces: {from: Selector, selector: {matchLabels: {env: prod}}}}}
`)
	c := newCluster()
	cases := []struct {
		name, route, reason string
		hostnames           []string
	}{
		{"hostnames intersect", `
metadata: {namespace: default, name: r}
spec: {hostnames: [a.example.com, b.org], parentRefs: [{name: gw, sectionName: wild}], rules: [{backendRefs: [{name: web, port: 8080}]}]}`,
			"Accepted", []string{"a.example.com"}},
		{"no hostname intersects", `
metadata: {namespace: default, name: r}
spec: {hostnames: [b.org], parentRefs: [{name: gw, sectionName: wild}], rules: [{backendRefs: [{name: web, port: 8080}]}]}`,
			"NoMatchingListenerHostname", nil},
		{"no such listener", `
metadata: {namespace: default, name: r}
spec: {parentRefs: [{name: gw, sectionName: nope}], rules: [{backendRefs: [{name: web, port: 8080}]}]}`,
			"NoMatchingParent", nil},
		{"namespace not allowed (Same)", `
metadata: {namespace: other, name: r}
spec: {parentRefs: [{name: gw, namespace: default, sectionName: wild}], rules: [{backendRefs: [{name: api, port: 80}]}]}`,
			"NotAllowedByListeners", nil},
		{"namespace selected", `
metadata: {namespace: default, name: r}
spec: {parentRefs: [{name: gw, port: 8080}], rules: [{backendRefs: [{name: web, port: 8080}]}]}`,
			"Accepted", nil},
		{"namespace not selected", `
metadata: {namespace: other, name: r}
spec: {parentRefs: [{name: gw, namespace: default, port: 8080}], rules: [{backendRefs: [{name: api, port: 80}]}]}`,
			"NotAllowedByListeners", nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := routeFrom(t, KindHTTPRoute, tc.route)
			res := render(t, gw, c, nil, r)
			if got := routeCondition(t, res, r, "Accepted"); got.Reason != tc.reason {
				t.Errorf("Accepted reason = %s (%s), want %s", got.Reason, got.Message, tc.reason)
			}
			if tc.hostnames != nil {
				got := res.Config.Listeners[0].HTTPRoutes[0].Hostnames
				if strings.Join(got, ",") != strings.Join(tc.hostnames, ",") {
					t.Errorf("hostnames = %v, want %v", got, tc.hostnames)
				}
			}
		})
	}
}

func TestRenderListenerProblems(t *testing.T) {
	gw := gatewayFrom(t, `
metadata: {namespace: default, name: gw}
spec:
  gatewayClassName: tailscale
  listeners:
  - {name: a, port: 80, protocol: HTTP, hostname: x.example.com}
  - {name: b, port: 80, protocol: HTTP, hostname: x.example.com}
  - {name: c, port: 443, protocol: HTTPS, tls: {certificateRefs: [{name: missing}]}}
  - {name: d, port: 443, protocol: TCP}
  - {name: e, port: 53, protocol: UDP}
  - {name: f, port: 8443, protocol: HTTPS, allowedRoutes: {kinds: [{kind: TCPRoute}]}}
`)
	res := render(t, gw, newCluster(), nil)
	st := Status(gw, res, Proxy{Reason: "Pending", Message: "waiting"})
	want := map[string]string{
		"a": "Conflicted=True/HostnameConflict", "b": "Conflicted=True/HostnameConflict",
		"c": "Conflicted=True/ProtocolConflict", "d": "Conflicted=True/ProtocolConflict",
		"e": "Programmed=False/Pending", "f": "ResolvedRefs=False/InvalidRouteKinds",
	}
	for _, l := range st.Listeners {
		found := false
		for _, c := range l.Conditions {
			if c.Type+"="+string(c.Status)+"/"+c.Reason == want[string(l.Name)] {
				found = true
			}
		}
		if !found {
			t.Errorf("listener %s: conditions %+v, want %s", l.Name, l.Conditions, want[string(l.Name)])
		}
	}
	if len(res.Config.Listeners) != 1 || res.Config.Listeners[0].Name != "e" {
		t.Errorf("only listener e is valid, config has %+v", res.Config.Listeners)
	}
	if st.Conditions[0].Reason != "ListenersNotValid" || st.Conditions[0].Status != metav1.ConditionTrue {
		t.Errorf("Gateway Accepted = %+v, want True/ListenersNotValid", st.Conditions[0])
	}
}

func TestRenderCertificateRef(t *testing.T) {
	gw := gatewayFrom(t, `
metadata: {namespace: default, name: gw}
spec:
  gatewayClassName: tailscale
  listeners:
  - {name: web, port: 443, protocol: HTTPS, hostname: app.example.com, tls: {certificateRefs: [{name: app-cert}]}}
  - {name: ts, port: 8443, protocol: HTTPS}
`)
	c := newCluster()
	res := render(t, gw, c, nil)
	if res.listeners[0].notResolved == nil || res.listeners[0].notResolved.Reason != "InvalidCertificateRef" || !res.AwaitingSecrets {
		t.Fatalf("missing Secret: %+v, awaiting it %v", res.listeners[0].notResolved, res.AwaitingSecrets)
	}
	c.secrets["default/app-cert"] = &corev1.Secret{Data: map[string][]byte{"tls.crt": []byte("not a certificate")}}
	if res = render(t, gw, c, nil); res.AwaitingSecrets || res.listeners[0].notResolved == nil {
		t.Fatalf("invalid Secret: %+v, awaiting it %v", res.listeners[0].notResolved, res.AwaitingSecrets)
	}
	cert, key := selfSigned(t, "app.example.com")
	c.secrets["default/app-cert"] = &corev1.Secret{Data: map[string][]byte{"tls.crt": cert, "tls.key": key}}
	res = render(t, gw, c, nil)
	if res.AwaitingSecrets {
		t.Error("the Secret exists, still awaited")
	}
	if len(res.Config.Listeners) != 2 {
		t.Fatalf("listeners: %+v", res.Config.Listeners)
	}
	if tls := res.Config.Listeners[0].TLS; tls.Mode != config.TLSSecret || tls.SecretName != "copy-web" {
		t.Errorf("certificateRefs listener TLS = %+v", tls)
	}
	if tls := res.Config.Listeners[1].TLS; tls.Mode != config.TLSTailscaleCert {
		t.Errorf("listener without certificateRefs TLS = %+v, want the device's own", tls)
	}
	if res.Certificates["copy-web"] == nil {
		t.Errorf("no copy of the certificate: %+v", res.Certificates)
	}
}

func TestRenderGRPCAndPlugins(t *testing.T) {
	gw := gatewayFrom(t, plainGateway)
	grpc := routeFrom(t, KindGRPCRoute, `
metadata: {namespace: default, name: g}
spec:
  parentRefs: [{name: gw}]
  rules:
  - matches: [{method: {service: echo.Echo, method: Ping}}]
    backendRefs: [{name: grpc, port: 9000}]
`)
	plugged := routeFrom(t, KindHTTPRoute, `
metadata: {namespace: default, name: p}
spec:
  parentRefs: [{name: gw}]
  rules:
  - filters: [{type: ExtensionRef, extensionRef: {group: tailplane.dev, kind: RoutingPlugin, name: canary}}]
    backendRefs: [{name: web, port: 8080}]
  - matches: [{path: {value: /x}}]
    filters: [{type: ExtensionRef, extensionRef: {group: tailplane.dev, kind: RoutingPlugin, name: gone}}]
    backendRefs: [{name: web, port: 8080}]
`)
	res := render(t, gw, newCluster(), nil, grpc, plugged)
	var g, p, gone *config.HTTPRoute
	for i, e := range res.Config.Listeners[0].HTTPRoutes {
		switch e.Name {
		case "default/g/0":
			g = &res.Config.Listeners[0].HTTPRoutes[i]
		case "default/p/0":
			p = &res.Config.Listeners[0].HTTPRoutes[i]
		case "default/p/1":
			gone = &res.Config.Listeners[0].HTTPRoutes[i]
		}
	}
	if g == nil || g.Match.PathType != config.MatchExact || g.Match.Path != "/echo.Echo/Ping" || !g.Backends[0].H2C {
		t.Errorf("gRPC entry = %+v", g)
	}
	if p == nil || len(p.Plugins) != 1 || p.Plugins[0].Name != "default/canary" || len(res.PluginSecrets) != 1 {
		t.Errorf("plugin entry = %+v, secrets %v", p, res.PluginSecrets)
	}
	if gone == nil || !gone.Backends[0].Invalid {
		t.Errorf("a rule whose plugin does not resolve must answer 500: %+v", gone)
	}
	if c := routeCondition(t, res, plugged, "ResolvedRefs"); c.Reason != ReasonPluginNotFound {
		t.Errorf("ResolvedRefs = %+v", c)
	}
}

func TestRenderDropsRouteThatLeft(t *testing.T) {
	gw := gatewayFrom(t, plainGateway)
	left := routeFrom(t, KindHTTPRoute, `
metadata: {namespace: default, name: left}
spec: {parentRefs: [{name: other-gw}], rules: [{backendRefs: [{name: web, port: 8080}]}]}
status: {parents: [{parentRef: {name: gw}, controllerName: tailplane.dev/gateway-controller, conditions: []}]}
`)
	res := render(t, gw, newCluster(), nil, left)
	if parents, ok := res.Parents[left.Key()]; !ok || parents != nil {
		t.Errorf("a route that left keeps no entry for the Gateway: %v (present %v)", parents, ok)
	}
}

func selfSigned(t *testing.T, host string) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: host}, DNSNames: []string{host},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb})
}

func TestRenderFunnelAndCertificates(t *testing.T) {
	gw := gatewayFrom(t, `
metadata: {namespace: default, name: gw}
spec:
  gatewayClassName: tailscale
  listeners:
  - {name: public, port: 443, protocol: HTTPS}
  - {name: odd, port: 9443, protocol: HTTPS}
  - {name: plain, port: 80, protocol: HTTP}
`)
	res, err := Render(gw, Inputs{Lookups: newCluster().lookups(), CertificateName: func(l string) string { return l }, Funnel: true})
	if err != nil {
		t.Fatal(err)
	}
	funnel := map[string]bool{}
	for _, l := range res.Config.Listeners {
		funnel[l.Name] = l.Funnel
	}
	if !funnel["public"] || funnel["odd"] || funnel["plain"] {
		t.Errorf("Funnel on %v, want only the HTTPS listener on a Funnel port", funnel)
	}
	res, err = Render(gw, Inputs{Lookups: newCluster().lookups(), CertificateName: func(l string) string { return l }, NoCertificates: "no certificates here"})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Config.Listeners) != 1 || res.Config.Listeners[0].Name != "plain" {
		t.Errorf("without certificates only the HTTP listener serves: %+v", res.Config.Listeners)
	}
	st := Status(gw, res, Proxy{})
	if c := st.Listeners[0].Conditions[0]; c.Reason != "UnsupportedValue" || c.Message != "no certificates here" {
		t.Errorf("HTTPS listener Accepted = %+v", c)
	}
}

func TestRenderHeadlessBackends(t *testing.T) {
	c := newCluster()
	headless := service("default", "db", corev1.ClusterIPNone, 8080, "")
	headless.Spec.Ports[0].TargetPort = intstr.FromInt32(3000)
	named := service("default", "named", corev1.ClusterIPNone, 8080, "")
	named.Spec.Ports[0].TargetPort = intstr.FromString("http")
	c.services["default/db"], c.services["default/named"] = headless, named
	route := routeFrom(t, KindHTTPRoute, `
metadata: {namespace: default, name: headless}
spec:
  parentRefs: [{name: gw}]
  rules:
  - matches: [{path: {type: Exact, value: /db}}]
    backendRefs: [{name: db, port: 8080}]
  - matches: [{path: {type: Exact, value: /named}}]
    backendRefs: [{name: named, port: 8080}]
`)
	look := c.lookups()
	look.ClusterDomain = "example.internal"
	res, err := Render(gatewayFrom(t, plainGateway), Inputs{Routes: []*Route{route}, Lookups: look,
		CertificateName: func(l string) string { return "copy-" + l }})
	if err != nil {
		t.Fatal(err)
	}
	byPath := map[string]config.WeightedBackend{}
	for _, e := range res.Config.Listeners[0].HTTPRoutes {
		byPath[e.Match.Path] = e.Backends[0]
	}
	if b := byPath["/db"]; b.Invalid || b.Address != "db.default.svc.example.internal:3000" {
		t.Errorf("headless backend = %+v, want the Service's DNS name at its target port", b)
	}
	if b := byPath["/named"]; !b.Invalid {
		t.Errorf("headless backend with a named targetPort = %+v, want Invalid", b)
	}
	c2 := routeCondition(t, res, route, "ResolvedRefs")
	if c2.Status != metav1.ConditionFalse || c2.Reason != "BackendNotFound" || !strings.Contains(c2.Message, `named targetPort "http"`) {
		t.Errorf("ResolvedRefs = %+v, want BackendNotFound naming the targetPort", c2)
	}
}
