package handlers_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/dynamic"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	"sigs.k8s.io/yaml"

	"github.com/tailplane/tailplane/handlers/gateway"
	"github.com/tailplane/tailplane/handlers/lib/resources"
	"github.com/tailplane/tailplane/handlers/lib/settings"
	"github.com/tailplane/tailplane/handlers/lib/tsservice"
	"github.com/tailplane/tailplane/internal/tailnet/tailnettest"
	"github.com/tailplane/tailplane/internal/testenv"
	"github.com/tailplane/tailplane/internal/testpoll"
	"github.com/tailplane/tailplane/proxy/config"
)

// withGatewayAPI installs the chart's Gateway API CRDs for the test and
// removes them after it.
func withGatewayAPI(t *testing.T) {
	t.Helper()
	crds := gatewayAPICRDs(t)
	dyn := dynamic.NewForConfigOrDie(env.Config(t))
	if err := testenv.InstallCRDs(context.Background(), dyn, crds...); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// A failed test may leave Gateways whose finalizer no operator
		// removes any more: their CRD would stay Terminating.
		ctx := context.Background()
		list, _ := dyn.Resource(resources.Gateways).List(ctx, metav1.ListOptions{})
		for _, gw := range list.Items {
			_, _ = dyn.Resource(resources.Gateways).Namespace(gw.GetNamespace()).Patch(ctx, gw.GetName(), types.MergePatchType,
				[]byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
		}
		removeGatewayAPI(t, dyn, crds)
	})
}

// newGatewayHarness runs the operator with the Gateway API CRDs installed
// and class as its GatewayClass (asOperator as in newHarnessOpts); the class
// goes at the end of the test.
func newGatewayHarness(t *testing.T, class string, asOperator bool) *harness {
	t.Helper()
	withGatewayAPI(t)
	h := newHarnessOpts(t, asOperator, func(s *settings.Settings) { s.GatewayClassName = class })
	t.Cleanup(func() {
		_ = h.dyn.Resource(resources.GatewayClasses).Delete(context.Background(), class, metav1.DeleteOptions{})
	})
	return h
}

// applyYAML creates or replaces (by merge patch of its spec) an object of
// resource res in namespace ns.
func (h *harness) applyYAML(res schema.GroupVersionResource, ns, doc string) {
	h.t.Helper()
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
		h.t.Fatal(err)
	}
	ri := h.dyn.Resource(res).Namespace(ns)
	if _, err := ri.Create(h.ctx(), u, metav1.CreateOptions{}); err == nil {
		return
	} else if !apierrors.IsAlreadyExists(err) {
		h.t.Fatal(err)
	}
	patch, _ := json.Marshal(map[string]any{"spec": u.Object["spec"]})
	if _, err := ri.Patch(h.ctx(), u.GetName(), types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		h.t.Fatal(err)
	}
}

func (h *harness) gatewayStatus(ns, name string) (*gatewayv1.Gateway, error) {
	u, err := h.dyn.Resource(resources.Gateways).Namespace(ns).Get(h.ctx(), name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	var gw gatewayv1.Gateway
	err = decodeJSON(u, &gw)
	return &gw, err
}

// decodeJSON decodes an object into a typed one through its JSON.
func decodeJSON(u *unstructured.Unstructured, out any) error {
	b, err := u.MarshalJSON()
	if err != nil {
		return err
	}
	return json.Unmarshal(b, out)
}

// routeParentsOf are a route's status.parents of our controller (res is the
// route's resource), as "<gateway>: <Accepted reason>/<ResolvedRefs reason>".
func (h *harness) routeParentsOf(res schema.GroupVersionResource, ns, name string) ([]string, error) {
	u, err := h.dyn.Resource(res).Namespace(ns).Get(h.ctx(), name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	var r struct {
		metav1.ObjectMeta `json:"metadata"`
		Status            gatewayv1.RouteStatus `json:"status"`
	}
	if err := decodeJSON(u, &r); err != nil {
		return nil, err
	}
	var out []string
	for _, p := range r.Status.Parents {
		if p.ControllerName != "tailplane.dev/gateway-controller" {
			continue
		}
		reasons := map[string]string{}
		for _, c := range p.Conditions {
			if c.ObservedGeneration != r.Generation {
				return nil, fmt.Errorf("condition %s of generation %d, route at %d", c.Type, c.ObservedGeneration, r.Generation)
			}
			reasons[c.Type] = c.Reason
		}
		out = append(out, string(p.ParentRef.Name)+": "+reasons["Accepted"]+"/"+reasons["ResolvedRefs"])
	}
	return out, nil
}

func (h *harness) wantRouteParents(ns, name string, want ...string) {
	h.t.Helper()
	h.wantRouteParentsOf(resources.HTTPRoutes, ns, name, want...)
}

func (h *harness) wantRouteParentsOf(res schema.GroupVersionResource, ns, name string, want ...string) {
	h.t.Helper()
	testpoll.Until(h.t, settle, fmt.Sprintf("%s %s parents %v", res.Resource, name, want), func() error {
		got, err := h.routeParentsOf(res, ns, name)
		if err != nil {
			return err
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			return fmt.Errorf("parents %v", got)
		}
		return nil
	})
}

// gatewayBackend is the first backend of the first route entry of the
// Gateway's proxy config.
func (h *harness) gatewayBackend(name string) (config.WeightedBackend, error) {
	cfg, err := h.proxyConfig(gateway.ParentType, name)
	if err != nil {
		return config.WeightedBackend{}, err
	}
	if cfg.Role != config.RoleGateway || cfg.Gateway == nil || len(cfg.Gateway.Listeners) == 0 || len(cfg.Gateway.Listeners[0].HTTPRoutes) == 0 {
		return config.WeightedBackend{}, fmt.Errorf("config without a route: %+v", cfg.Gateway)
	}
	return cfg.Gateway.Listeners[0].HTTPRoutes[0].Backends[0], nil
}

// A Gateway of our class gets a device whose config serves its routes, and
// statuses as the spec says; then each kind of change: the device logs in
// (Programmed, addresses), a backend deleted and re-created, a
// cross-namespace backend without, with and after a ReferenceGrant, the
// listener a route names removed and added back, a route moved to another
// Gateway, the operator restarted, and the Gateways deleted: nothing is
// left (proxy objects, route entries, finalizers).
func TestGateway(t *testing.T) {
	const class = "tailscale-gw-routes"
	h := newGatewayHarness(t, class, false)
	ns, other := h.ns, env.Namespace(t)
	h.createService(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 8080}}}})
	gatewayDoc := func(name string) string {
		return fmt.Sprintf(`
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: %s}
spec:
  gatewayClassName: %s
  listeners: [{name: http, port: 80, protocol: HTTP, allowedRoutes: {namespaces: {from: All}}}]
`, name, class)
	}
	routeDoc := func(gw, backendNS string) string {
		return fmt.Sprintf(`
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: app}
spec:
  parentRefs: [{name: %s, namespace: %s, sectionName: http}]
  rules: [{backendRefs: [{name: web, namespace: %s, port: 8080}]}]
`, gw, ns, backendNS)
	}
	h.applyYAML(resources.Gateways, ns, gatewayDoc("gw1"))
	h.applyYAML(resources.HTTPRoutes, ns, routeDoc("gw1", ns))

	web := h.service("web")
	wantAddress := net.JoinHostPort(web.Spec.ClusterIP, "8080")
	testpoll.Until(t, settle, "gw1's proxy config routes to web", func() error {
		b, err := h.gatewayBackend("gw1")
		if err == nil && (b.Invalid || b.Address != wantAddress) {
			err = fmt.Errorf("backend %+v, want %s", b, wantAddress)
		}
		return err
	})
	h.wantRouteParents(ns, "app", "gw1: Accepted/ResolvedRefs")
	testpoll.Until(t, settle, "gw1 Accepted, waiting for its address", func() error {
		gw, err := h.gatewayStatus(ns, "gw1")
		if err != nil {
			return err
		}
		return wantGatewayConditions(gw, "Accepted=True/Accepted", "Programmed=False/AddressNotAssigned")
	})

	fqdn := ns + "-gw1-gateway.tail1.ts.net"
	h.simulateLogin(gateway.ParentType, "gw1", "nGW1", fqdn, "100.64.7.1", "fd7a:115c:a1e0::7:1")
	testpoll.Until(t, settle, "gw1 Programmed with its tailnet addresses", func() error {
		gw, err := h.gatewayStatus(ns, "gw1")
		if err != nil {
			return err
		}
		if err := wantGatewayConditions(gw, "Accepted=True/Accepted", "Programmed=True/Programmed"); err != nil {
			return err
		}
		if len(gw.Status.Addresses) != 3 || gw.Status.Addresses[0].Value != "100.64.7.1" || gw.Status.Addresses[2].Value != fqdn {
			return fmt.Errorf("addresses %+v", gw.Status.Addresses)
		}
		if len(gw.Status.Listeners) != 1 || gw.Status.Listeners[0].AttachedRoutes != 1 {
			return fmt.Errorf("listeners %+v", gw.Status.Listeners)
		}
		return nil
	})

	// A backend deleted: its share answers 500, the route says why; re-created: served again.
	if err := h.kube.CoreV1().Services(ns).Delete(h.ctx(), "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	h.wantRouteParents(ns, "app", "gw1: Accepted/BackendNotFound")
	testpoll.Until(t, settle, "the deleted backend marked invalid", func() error {
		if b, err := h.gatewayBackend("gw1"); err != nil || !b.Invalid {
			return fmt.Errorf("backend %+v (%v)", b, err)
		}
		return nil
	})
	h.createService(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 8080}}}})
	h.wantRouteParents(ns, "app", "gw1: Accepted/ResolvedRefs")
	testpoll.Until(t, settle, "the re-created backend served at its new ClusterIP", func() error {
		b, err := h.gatewayBackend("gw1")
		if err == nil && (b.Invalid || b.Address != net.JoinHostPort(h.service("web").Spec.ClusterIP, "8080")) {
			err = fmt.Errorf("backend %+v", b)
		}
		return err
	})

	// A backend in another namespace: refused, permitted by a
	// ReferenceGrant, refused again once the grant is revoked.
	if _, err := h.kube.CoreV1().Services(other).Create(h.ctx(), &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: other},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 8080}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.applyYAML(resources.HTTPRoutes, ns, routeDoc("gw1", other))
	h.wantRouteParents(ns, "app", "gw1: Accepted/RefNotPermitted")
	h.applyYAML(resources.ReferenceGrants, other, fmt.Sprintf(`
apiVersion: gateway.networking.k8s.io/v1
kind: ReferenceGrant
metadata: {name: from-routes}
spec:
  from: [{group: gateway.networking.k8s.io, kind: HTTPRoute, namespace: %s}]
  to: [{group: "", kind: Service}]
`, ns))
	h.wantRouteParents(ns, "app", "gw1: Accepted/ResolvedRefs")
	if err := h.dyn.Resource(resources.ReferenceGrants).Namespace(other).Delete(h.ctx(), "from-routes", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	h.wantRouteParents(ns, "app", "gw1: Accepted/RefNotPermitted")
	testpoll.Until(t, settle, "the revoked backend marked invalid", func() error {
		if b, err := h.gatewayBackend("gw1"); err != nil || !b.Invalid {
			return fmt.Errorf("backend %+v (%v)", b, err)
		}
		return nil
	})

	// The listener the route names is removed, then comes back.
	h.applyYAML(resources.Gateways, ns, strings.Replace(gatewayDoc("gw1"), "name: http,", "name: web,", 1))
	h.wantRouteParents(ns, "app", "gw1: NoMatchingParent/RefNotPermitted")
	h.applyYAML(resources.Gateways, ns, gatewayDoc("gw1"))
	h.wantRouteParents(ns, "app", "gw1: Accepted/RefNotPermitted")

	// The route moves to another Gateway: gw1's entry goes, gw2's comes,
	// across an operator restart.
	h.applyYAML(resources.Gateways, ns, gatewayDoc("gw2"))
	h.applyYAML(resources.HTTPRoutes, ns, routeDoc("gw2", ns))
	h.restart()
	h.wantRouteParents(ns, "app", "gw2: Accepted/ResolvedRefs")
	testpoll.Until(t, settle, "gw1 without attached routes", func() error {
		gw, err := h.gatewayStatus(ns, "gw1")
		if err != nil {
			return err
		}
		if len(gw.Status.Listeners) != 1 || gw.Status.Listeners[0].AttachedRoutes != 0 {
			return fmt.Errorf("listeners %+v", gw.Status.Listeners)
		}
		return nil
	})

	// gw1 moves to another controller's class: its device, proxy and our
	// finalizer go, and the Gateway stays; back in our class it is served
	// again.
	h.applyYAML(resources.GatewayClasses, "", `
apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: someone-elses}
spec: {controllerName: example.com/gateway-controller}
`)
	t.Cleanup(func() {
		_ = h.dyn.Resource(resources.GatewayClasses).Delete(context.Background(), "someone-elses", metav1.DeleteOptions{})
	})
	h.applyYAML(resources.Gateways, ns, strings.Replace(gatewayDoc("gw1"), "gatewayClassName: "+class, "gatewayClassName: someone-elses", 1))
	testpoll.Until(t, settle, "gw1 of another controller released", func() error {
		u, err := h.dyn.Resource(resources.Gateways).Namespace(ns).Get(h.ctx(), "gw1", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if f := u.GetFinalizers(); len(f) != 0 {
			return fmt.Errorf("finalizers %v", f)
		}
		if devices := h.api.Devices(); len(devices) != 0 {
			return fmt.Errorf("devices left: %+v (gw2 never logged in)", devices)
		}
		return h.proxyGone(gateway.ParentType, "gw1")
	})
	h.applyYAML(resources.Gateways, ns, gatewayDoc("gw1"))
	testpoll.Until(t, settle, "gw1 back in our class, Accepted", func() error {
		gw, err := h.gatewayStatus(ns, "gw1")
		if err != nil {
			return err
		}
		if _, err := h.proxyConfig(gateway.ParentType, "gw1"); err != nil {
			return fmt.Errorf("no proxy config: %w", err)
		}
		return wantGatewayConditions(gw, "Accepted=True/Accepted")
	})

	// Deleted: proxies, route entries and finalizers go.
	for _, name := range []string{"gw1", "gw2"} {
		if err := h.dyn.Resource(resources.Gateways).Namespace(ns).Delete(h.ctx(), name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	h.wantRouteParents(ns, "app")
	for _, name := range []string{"gw1", "gw2"} {
		testpoll.Until(t, settle, name+" and its proxy gone", func() error {
			if _, err := h.gatewayStatus(ns, name); !apierrors.IsNotFound(err) {
				return fmt.Errorf("Gateway still there (%v)", err)
			}
			return h.proxyGone(gateway.ParentType, name)
		})
	}
	if devices := h.api.Devices(); len(devices) != 0 {
		t.Errorf("devices left: %+v", devices)
	}
}

// wantGatewayConditions checks the Gateway's conditions, as
// "Type=Status/Reason", each of the Gateway's generation.
func wantGatewayConditions(gw *gatewayv1.Gateway, want ...string) error {
	have := map[string]string{}
	for _, c := range gw.Status.Conditions {
		if c.ObservedGeneration != gw.Generation {
			return fmt.Errorf("condition %s of generation %d, Gateway at %d", c.Type, c.ObservedGeneration, gw.Generation)
		}
		have[c.Type] = c.Type + "=" + string(c.Status) + "/" + c.Reason
	}
	for _, w := range want {
		typ, _, _ := strings.Cut(w, "=")
		if have[typ] != w {
			return fmt.Errorf("%s is %q, want %q (all: %v)", typ, have[typ], w, have)
		}
	}
	return nil
}

// A Gateway naming a ProxyGroup is a Tailscale Service every replica
// serves (one shared certificate, issued by replica 0); it moves to a
// device of its own and back with its status and routes kept, and leaves
// nothing behind when deleted.
func TestGatewayOnProxyGroup(t *testing.T) {
	const class = "tailscale-gw-group"
	h := newGatewayHarness(t, class, true)
	g := h.proxyGroup(`{"type":"ingress"}`)
	g.login(0)
	g.login(1)
	ns := h.ns
	h.createService(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 8080}}}})
	gatewayDoc := func(group string) string {
		return fmt.Sprintf(`
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: shared, annotations: {tailscale.com/hostname: shared-gw}}
spec:
  gatewayClassName: %s
  infrastructure: %s
  listeners:
  - {name: https, port: 443, protocol: HTTPS}
  - {name: http, port: 80, protocol: HTTP}
`, class, group)
	}
	inGroup := gatewayDoc(fmt.Sprintf("{parametersRef: {group: tailscale.com, kind: ProxyGroup, name: %s}}", g.name))
	h.applyYAML(resources.Gateways, ns, inGroup)
	h.applyYAML(resources.HTTPRoutes, ns, `
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: app}
spec:
  parentRefs: [{name: shared}]
  rules: [{backendRefs: [{name: web, port: 8080}]}]
`)
	h.wantTailscaleService("svc:shared-gw", func(s tailnettest.Service) error {
		if !slices.Equal(s.Ports, []string{"tcp:443", "tcp:80"}) {
			return fmt.Errorf("service %+v", s)
		}
		return nil
	})
	web := h.service("web")
	for i := range 2 {
		svcs := g.wantHosted(i, "svc:shared-gw")
		gw := svcs[0].Gateway
		if gw == nil || len(gw.Listeners) != 2 {
			t.Fatalf("replica %d hosts %+v", i, svcs[0])
		}
		tls := gw.Listeners[0].TLS
		if tls == nil || tls.Mode != config.TLSShared || tls.SecretName != tsservice.CertSecretName("shared-gw") || tls.Issue != (i == 0) {
			t.Fatalf("replica %d TLS %+v", i, tls)
		}
		if b := gw.Listeners[1].HTTPRoutes[0].Backends[0]; b.Address != net.JoinHostPort(web.Spec.ClusterIP, "8080") {
			t.Fatalf("replica %d backend %+v", i, b)
		}
	}
	h.wantRouteParents(ns, "app", "shared: Accepted/ResolvedRefs")
	g.advertise(0, "svc:shared-gw")
	testpoll.Until(t, settle, "the Gateway Programmed at its Tailscale Service's addresses", func() error {
		gw, err := h.gatewayStatus(ns, "shared")
		if err != nil {
			return err
		}
		if err := wantGatewayConditions(gw, "Accepted=True/Accepted", "Programmed=True/Programmed"); err != nil {
			return err
		}
		n := len(gw.Status.Addresses)
		if n < 2 || gw.Status.Addresses[n-1].Value != "shared-gw.tail1.ts.net" {
			return fmt.Errorf("addresses %+v", gw.Status.Addresses)
		}
		return nil
	})

	// Funnel is not offered on a Tailscale Service: the annotation is
	// ignored, with a Warning saying so.
	funnel := func(on string) {
		t.Helper()
		patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%s}}}`, gateway.AnnotationFunnel, on)
		if _, err := h.dyn.Resource(resources.Gateways).Namespace(ns).Patch(h.ctx(), "shared", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	funnel(`"true"`)
	h.wantEvent(ns, "shared", corev1.EventTypeWarning, gateway.ReasonFunnelNotSupported, "not supported on a Gateway served by a ProxyGroup")
	funnel("null")

	// To a device of its own: the Tailscale Service goes, a proxy comes;
	// the route stays attached.
	h.applyYAML(resources.Gateways, ns, gatewayDoc("null"))
	h.wantNoTailscaleService("svc:shared-gw")
	g.wantHosted(0)
	testpoll.Until(t, settle, "the Gateway's own proxy", func() error { return h.proxyExists(gateway.ParentType, "shared") })
	h.wantRouteParents(ns, "app", "shared: Accepted/ResolvedRefs")

	// And back.
	h.applyYAML(resources.Gateways, ns, inGroup)
	h.wantTailscaleService("svc:shared-gw", nil)
	testpoll.Until(t, settle, "the Gateway's own proxy gone", func() error { return h.proxyGone(gateway.ParentType, "shared") })
	g.wantHosted(1, "svc:shared-gw")
	h.wantRouteParents(ns, "app", "shared: Accepted/ResolvedRefs")

	if err := h.dyn.Resource(resources.Gateways).Namespace(ns).Delete(h.ctx(), "shared", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	h.wantNoTailscaleService("svc:shared-gw")
	g.wantHosted(0)
	h.wantRouteParents(ns, "app")
	testpoll.Until(t, settle, "the Gateway gone", func() error {
		if _, err := h.gatewayStatus(ns, "shared"); !apierrors.IsNotFound(err) {
			return fmt.Errorf("still there (%v)", err)
		}
		if _, err := h.kube.CoreV1().Secrets(h.opNS).Get(h.ctx(), tsservice.CertSecretName("shared-gw"), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("certificate Secret still there (%v)", err)
		}
		return nil
	})
}

// A route applied before its backend Services (as kubectl apply of one file
// does): each Service's arrival resolves its backend, whether it has a
// ClusterIP or is headless, with or without a selector.
func TestGatewayRouteBeforeItsBackends(t *testing.T) {
	const class = "tailscale-gw-late-backends"
	h := newGatewayHarness(t, class, false)
	ns := h.ns
	h.applyYAML(resources.Gateways, ns, fmt.Sprintf(`
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: gw}
spec:
  gatewayClassName: %s
  listeners: [{name: http, port: 80, protocol: HTTP}]
`, class))
	testpoll.Until(t, settle, "gw Accepted", func() error {
		gw, err := h.gatewayStatus(ns, "gw")
		if err != nil {
			return err
		}
		return wantGatewayConditions(gw, "Accepted=True/Accepted", "Programmed=False/AddressNotAssigned")
	})
	h.applyYAML(resources.HTTPRoutes, ns, `
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: app}
spec:
  parentRefs: [{name: gw}]
  rules:
  - matches: [{path: {type: Exact, value: /virtual}}]
    backendRefs: [{name: virtual, port: 8080}]
  - matches: [{path: {type: Exact, value: /headless}}]
    backendRefs: [{name: headless, port: 8080}]
`)
	for _, svc := range []*corev1.Service{
		{ObjectMeta: metav1.ObjectMeta{Name: "virtual"}, Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 8080, TargetPort: intstr.FromInt32(3000)}}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "headless"}, Spec: corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone,
			Selector: map[string]string{"app": "web"}, Ports: []corev1.ServicePort{{Port: 8080, TargetPort: intstr.FromInt32(3000)}}}},
	} {
		h.createService(svc)
	}
	h.wantRouteParents(ns, "app", "gw: Accepted/ResolvedRefs")
}
