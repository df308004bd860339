package ingress_test

import (
	"errors"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/tailplane/tailplane/handlers/ingress"
	"github.com/tailplane/tailplane/handlers/lib/ingressroutes"
	"github.com/tailplane/tailplane/handlers/lib/pipeline"
	"github.com/tailplane/tailplane/handlers/lib/proxyset"
	"github.com/tailplane/tailplane/handlers/lib/settings"
	"github.com/tailplane/tailplane/proxy/config"
)

var opts = settings.Settings{Namespace: "tailscale", ProxyImage: "ghcr.io/tailplane/tailplane-proxy:test", ProxyTags: []string{"tag:k8s"}, IngressClassName: "tailscale"}

// seedIngress is the seed's Ingress example, unchanged, in namespace default.
func seedIngress(t *testing.T) *networkingv1.Ingress {
	t.Helper()
	b, err := os.ReadFile("../../examples/seed/03-ingress.yaml")
	if err != nil {
		t.Fatal(err)
	}
	ing := &networkingv1.Ingress{}
	if err := yaml.UnmarshalStrict(b, ing); err != nil {
		t.Fatal(err)
	}
	ing.Namespace, ing.UID = "default", "uid-ing"
	return ing
}

func services(svcs ...*corev1.Service) ingressroutes.ServiceLookup {
	return func(name string) (*corev1.Service, error) {
		for _, s := range svcs {
			if s.Name == name {
				return s, nil
			}
		}
		return nil, nil
	}
}

// render is what the pipeline applies for ing (no plugins, a tailnet with
// every feature, replica 0's auth key key), and the Events to post.
func render(ing *networkingv1.Ingress, lookup ingressroutes.ServiceLookup, key string) (*pipeline.Objects, []ingressroutes.Problem, error) {
	plan, problems, err := ingress.Plan(ing, opts, ingress.Inputs{Lookup: lookup})
	if err != nil {
		return nil, problems, err
	}
	objs, err := pipeline.Render(ingress.Parent(ing), opts, plan, pipeline.Login{Keys: []string{key}})
	return objs, problems, err
}

func backendSvc(name, ip string, ports ...corev1.ServicePort) *corev1.Service {
	if len(ports) == 0 {
		ports = []corev1.ServicePort{{Name: "http", Port: 80}}
	}
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}, Spec: corev1.ServiceSpec{ClusterIP: ip, Ports: ports}}
}

func backend(svc string, port any) networkingv1.IngressBackend {
	b := networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: svc}}
	switch p := port.(type) {
	case int:
		b.Service.Port.Number = int32(p)
	case string:
		b.Service.Port.Name = p
	}
	return b
}

func path(p string, b networkingv1.IngressBackend) networkingv1.HTTPIngressPath {
	prefix := networkingv1.PathTypePrefix
	return networkingv1.HTTPIngressPath{Path: p, PathType: &prefix, Backend: b}
}

func rule(host string, paths ...networkingv1.HTTPIngressPath) networkingv1.IngressRule {
	return networkingv1.IngressRule{Host: host, IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{Paths: paths}}}
}

func TestIsOurs(t *testing.T) {
	ing := seedIngress(t)
	if !ingress.IsOurs(ing, "tailscale") {
		t.Fatal("the seed's Ingress is not ours")
	}
	if ingress.IsOurs(ing, "tailnet") {
		t.Fatal("class name must match exactly the configured one")
	}
	traefik := "traefik"
	other := ing.DeepCopy()
	other.Spec.IngressClassName = &traefik
	noClass := ing.DeepCopy()
	noClass.Spec.IngressClassName = nil
	pg := ing.DeepCopy()
	pg.Annotations = map[string]string{"tailscale.com/proxy-group": "ingress-proxies"}
	for name, i := range map[string]*networkingv1.Ingress{"traefik": other, "no class": noClass, "proxy group": pg} {
		if ingress.IsOurs(i, "tailscale") {
			t.Errorf("%s: claimed", name)
		}
	}
}

func TestHostname(t *testing.T) {
	ing := seedIngress(t)
	if h, err := ingress.Hostname(ing); err != nil || h != "my-app" {
		t.Fatalf("seed: %q %v", h, err)
	}
	ing.Spec.TLS[0].Hosts[0] = "my-app.tail1.ts.net"
	if h, _ := ingress.Hostname(ing); h != "my-app" {
		t.Fatalf("first label: %q", h)
	}
	ing.Spec.TLS = nil
	if h, _ := ingress.Hostname(ing); h != "default-my-app-ingress" {
		t.Fatalf("official default: %q", h)
	}
	ing.Spec.TLS = []networkingv1.IngressTLS{{Hosts: []string{"my_app"}}}
	if _, err := ingress.Hostname(ing); err == nil || !strings.Contains(err.Error(), `invalid Tailscale hostname "my_app"`) {
		t.Fatalf("invalid: %v", err)
	}
}

// The seed's Ingress renders into an L7 proxy routing / to my-app:80.
func TestRenderSeedIngress(t *testing.T) {
	ing := seedIngress(t)
	objs, problems, err := render(ing, services(backendSvc("my-app", "10.43.0.20")), "tskey-auth-1")
	if err != nil || len(problems) != 0 {
		t.Fatalf("%v %v", err, problems)
	}
	cfg, err := config.Parse(objs.Replicas[0].ConfigSecret.Data[config.SecretKey])
	if err != nil {
		t.Fatal(err)
	}
	want := &config.Config{
		Version: config.Version, Hostname: "my-app", Tags: []string{"tag:k8s"}, AuthKey: "tskey-auth-1", Role: config.RoleIngressL7,
		L7: &config.L7{Rules: []config.Rule{{Paths: []config.Path{{Path: "/", PathType: config.PathPrefix,
			Backend: config.Backend{Service: "default/my-app:80", Address: "10.43.0.20:80"}}}}}},
	}
	if !reflect.DeepEqual(cfg, want) {
		t.Fatalf("config\n got %+v\nwant %+v", cfg, want)
	}
	if l := objs.StatefulSet.Labels; l["tailscale.com/parent-resource-type"] != "ingress" || l["tailscale.com/parent-resource"] != "my-app" {
		t.Fatalf("labels %v", l)
	}
}

func TestRoutesKeepWhatIsValid(t *testing.T) {
	ing := seedIngress(t)
	ing.Spec.DefaultBackend = &networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: "fallback", Port: networkingv1.ServiceBackendPort{Number: 8080}}}
	ing.Spec.Rules = []networkingv1.IngressRule{
		rule("", path("/api", backend("api", "https")), path("/missing", backend("nope", 80)), path("", backend("my-app", "http"))),
		rule("my-app", path("/tls-host", backend("my-app", 80))),
		rule("other.example.com", path("/", backend("my-app", 80))),
		rule("", path("/headless", backend("headless", 80)), path("/badport", backend("my-app", "grpc"))),
	}
	lookup := services(
		backendSvc("my-app", "10.43.0.20"),
		backendSvc("api", "10.43.0.21", corev1.ServicePort{Name: "https", Port: 8443}),
		backendSvc("fallback", "fd00::5"),
		backendSvc("headless", "None"),
	)
	l7, problems, err := ingressroutes.L7(ing, lookup)
	if err != nil {
		t.Fatal(err)
	}
	want := &config.L7{
		DefaultBackend: &config.Backend{Service: "default/fallback:8080", Address: "[fd00::5]:8080"},
		Rules: []config.Rule{{Paths: []config.Path{
			{Path: "/api", PathType: config.PathPrefix, Backend: config.Backend{Service: "default/api:8443", Address: "10.43.0.21:8443", HTTPS: true}},
			{Path: "/", PathType: config.PathPrefix, Backend: config.Backend{Service: "default/my-app:80", Address: "10.43.0.20:80"}},
			{Path: "/tls-host", PathType: config.PathPrefix, Backend: config.Backend{Service: "default/my-app:80", Address: "10.43.0.20:80"}},
		}}},
	}
	if !reflect.DeepEqual(l7, want) {
		t.Fatalf("routes\n got %+v\nwant %+v", l7, want)
	}
	for _, want := range []ingressroutes.Problem{
		{Type: "Warning", Reason: "InvalidIngressBackend", Message: `failed to get service "nope" for path "/missing": Service "nope" not found`},
		{Type: "Normal", Reason: "PathUndefined", Message: "configured backend is missing a path, defaulting to '/'"},
		{Type: "Warning", Reason: "InvalidIngressBackend", Message: `rule with host "other.example.com" ignored, unsupported`},
		{Type: "Warning", Reason: "InvalidIngressBackend", Message: `backend for path "/headless" has invalid ClusterIP`},
		{Type: "Warning", Reason: "InvalidIngressBackend", Message: `backend for path "/badport" has invalid port`},
	} {
		if !slices.Contains(problems, want) {
			t.Errorf("missing event %+v in %+v", want, problems)
		}
	}
	cfg := &config.Config{Version: config.Version, Hostname: "my-app", Role: config.RoleIngressL7, L7: l7}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("the proxy would refuse these routes: %v", err)
	}
}

func TestNoValidBackends(t *testing.T) {
	ing := seedIngress(t)
	objs, problems, err := render(ing, services(), "")
	if !errors.Is(err, ingressroutes.ErrNoValidBackends) || objs != nil {
		t.Fatalf("got %v, %v", objs, err)
	}
	if !slices.ContainsFunc(problems, func(p ingressroutes.Problem) bool { return p.Reason == "NoValidBackends" }) {
		t.Fatalf("no NoValidBackends event in %+v", problems)
	}
	ing.Spec.Rules = nil
	if _, _, err := render(ing, services(), ""); !errors.Is(err, ingressroutes.ErrNoValidBackends) {
		t.Fatalf("Ingress without rules: %v", err)
	}
}

func TestRedirectFunnelAndStatus(t *testing.T) {
	ing := seedIngress(t)
	ing.Annotations = map[string]string{"tailscale.com/http-redirect": "true", "tailscale.com/funnel": "1"}
	cfg, _, err := ingress.Config(ing, opts, services(backendSvc("my-app", "10.43.0.20")))
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.L7.HTTPRedirect || !cfg.L7.Funnel {
		t.Fatalf("redirect %v funnel %v", cfg.L7.HTTPRedirect, cfg.L7.Funnel)
	}
	dev := proxyset.Device{FQDN: "my-app.tail1.ts.net", IPs: []string{"100.64.0.9"}}
	got := ingress.LoadBalancerIngress(ing, dev)
	want := []networkingv1.IngressLoadBalancerIngress{{Hostname: "my-app.tail1.ts.net", Ports: []networkingv1.IngressPortStatus{{Port: 443, Protocol: "TCP"}, {Port: 80, Protocol: "TCP"}}}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("status with redirect: %+v", got)
	}
	ing.Annotations = map[string]string{"tailscale.com/http-redirect": "no", "tailscale.com/funnel": "false"}
	cfg, _, _ = ingress.Config(ing, opts, services(backendSvc("my-app", "10.43.0.20")))
	if cfg.L7.HTTPRedirect || cfg.L7.Funnel {
		t.Fatal("off values turned features on")
	}
	if got := ingress.LoadBalancerIngress(ing, dev); len(got[0].Ports) != 1 || got[0].Ports[0].Port != 443 {
		t.Fatalf("status without redirect: %+v", got)
	}
	if got := ingress.LoadBalancerIngress(ing, proxyset.Device{}); got != nil {
		t.Fatalf("status before the device is known: %+v", got)
	}
}

// Beyond the official operator: tls.secretName serves that certificate and
// routes by host.
func TestCustomCertificate(t *testing.T) {
	ing := seedIngress(t)
	ing.Spec.TLS = []networkingv1.IngressTLS{{Hosts: []string{"app.example.com"}, SecretName: "app-cert"}}
	ing.Spec.Rules = []networkingv1.IngressRule{rule("app.example.com", path("/", backend("my-app", 80)))}
	objs, problems, err := render(ing, services(backendSvc("my-app", "10.43.0.20")), "")
	if err != nil || len(problems) != 0 {
		t.Fatalf("%v %v", err, problems)
	}
	cfg, err := config.Parse(objs.Replicas[0].ConfigSecret.Data[config.SecretKey])
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Hostname != "app" || cfg.L7.TLS != (config.TLS{Mode: config.TLSSecret, SecretName: ingress.TLSSecretName(ing)}) || cfg.L7.Rules[0].Host != "app.example.com" {
		t.Fatalf("config %+v", cfg.L7)
	}
	if names := objs.Role.Rules[0].ResourceNames; !slices.Contains(names, ingress.TLSSecretName(ing)) {
		t.Fatalf("the proxy cannot read its certificate: %v", names)
	}
}

func TestBackendServices(t *testing.T) {
	ing := seedIngress(t)
	ing.Spec.DefaultBackend = &networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: "fallback"}}
	ing.Spec.Rules = append(ing.Spec.Rules, rule("", path("/x", backend("my-app", 80)), path("/y", backend("api", 80))))
	if got := ingressroutes.BackendServices(ing); !reflect.DeepEqual(got, []string{"fallback", "my-app", "api"}) {
		t.Fatalf("got %v", got)
	}
}

func TestInvalidTagsAreRefused(t *testing.T) {
	ing := seedIngress(t)
	ing.Annotations = map[string]string{"tailscale.com/tags": "tag:ok,bad"}
	if _, _, err := render(ing, services(backendSvc("my-app", "10.43.0.20")), ""); err == nil || !strings.Contains(err.Error(), `invalid tag "bad"`) {
		t.Fatalf("got %v", err)
	}
}

// A dedicated proxy serves tls[0].hosts[0] only: further tls entries, and
// further hosts of tls[0] without a custom certificate, are named in a
// Warning instead of being dropped silently.
func TestExtraTLSIsReported(t *testing.T) {
	ing := seedIngress(t)
	ing.Spec.TLS = []networkingv1.IngressTLS{
		{Hosts: []string{"my-app", "second.example.com"}},
		{Hosts: []string{"third.example.com"}, SecretName: "third-cert"},
	}
	lookup := services(backendSvc("my-app", "10.43.0.20"))
	_, problems, err := ingressroutes.L7(ing, lookup)
	if err != nil {
		t.Fatal(err)
	}
	want := ingressroutes.Problem{Type: "Warning", Reason: "InvalidIngressConfiguration", Message: `only a single TLS entry with a single host is supported: ` +
		`the proxy serves "my-app" (tls[0]) and ignores hosts ["second.example.com"] of tls[0], tls[1] (hosts ["third.example.com"], secretName "third-cert")`}
	if !slices.Contains(problems, want) {
		t.Fatalf("missing %+v in %+v", want, problems)
	}
	// One entry with one host is what is served: nothing to report.
	ing.Spec.TLS = ing.Spec.TLS[:1]
	ing.Spec.TLS[0].Hosts = ing.Spec.TLS[0].Hosts[:1]
	if _, problems, _ := ingressroutes.L7(ing, lookup); slices.ContainsFunc(problems, func(p ingressroutes.Problem) bool { return p.Reason == "InvalidIngressConfiguration" }) {
		t.Fatalf("warned about a single TLS entry: %+v", problems)
	}
}
