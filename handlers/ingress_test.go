package handlers_test

import (
	"fmt"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/tailplane/tailplane/internal/testpoll"
	"github.com/tailplane/tailplane/proxy/config"
)

func (h *harness) createIngressClass(defaultMark bool) {
	h.t.Helper()
	ic := &networkingv1.IngressClass{ObjectMeta: metav1.ObjectMeta{Name: "tailscale"}, Spec: networkingv1.IngressClassSpec{Controller: "tailscale.com/ts-ingress"}}
	if defaultMark {
		ic.Annotations = map[string]string{"ingressclass.kubernetes.io/is-default-class": "true"}
	}
	_ = h.kube.NetworkingV1().IngressClasses().Delete(h.ctx(), "tailscale", metav1.DeleteOptions{})
	testpoll.Until(h.t, settle, "old IngressClass gone", func() error {
		_, err := h.kube.NetworkingV1().IngressClasses().Get(h.ctx(), "tailscale", metav1.GetOptions{})
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("still there: %v", err)
		}
		return nil
	})
	if _, err := h.kube.NetworkingV1().IngressClasses().Create(h.ctx(), ic, metav1.CreateOptions{}); err != nil {
		h.t.Fatal(err)
	}
}

func (h *harness) backend(name string, port int32) *corev1.Service {
	h.t.Helper()
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: h.ns},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: port}}}}
	out, err := h.kube.CoreV1().Services(h.ns).Create(h.ctx(), svc, metav1.CreateOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	return out
}

func (h *harness) createIngress(name string, annotations map[string]string, spec networkingv1.IngressSpec) {
	h.t.Helper()
	class := "tailscale"
	spec.IngressClassName = &class
	ing := &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: h.ns, Annotations: annotations}, Spec: spec}
	if _, err := h.kube.NetworkingV1().Ingresses(h.ns).Create(h.ctx(), ing, metav1.CreateOptions{}); err != nil {
		h.t.Fatal(err)
	}
}

func defaultBackend(svc string, port int32) *networkingv1.IngressBackend {
	return &networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: svc, Port: networkingv1.ServiceBackendPort{Number: port}}}
}

// The seed's Ingress shape: TLS host, default backend, http-redirect. The
// proxy routes to the backend's ClusterIP, follows a ClusterIP change (the
// backend index), reports hostname and ports, and goes on delete.
func TestIngressLifecycle(t *testing.T) {
	h := newHarness(t, nil)
	h.createIngressClass(false)
	web := h.backend("web", 8080)
	h.createIngress("site", map[string]string{"tailscale.com/http-redirect": "true"}, networkingv1.IngressSpec{
		DefaultBackend: defaultBackend("web", 8080),
		TLS:            []networkingv1.IngressTLS{{Hosts: []string{"site"}}},
	})
	testpoll.Until(t, settle, "proxy objects", func() error { return h.proxyExists("ingress", "site") })
	cfg, err := h.proxyConfig("ingress", "site")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Role != config.RoleIngressL7 || cfg.Hostname != "site" || !cfg.L7.HTTPRedirect || cfg.L7.DefaultBackend == nil ||
		cfg.L7.DefaultBackend.Address != web.Spec.ClusterIP+":8080" {
		t.Fatalf("config: %+v %+v", cfg, cfg.L7)
	}
	h.simulateLogin("ingress", "site", "nSITE", "site.tail1.ts.net", "100.64.0.10")
	testpoll.Until(t, settle, "Ingress status", func() error {
		ing, err := h.kube.NetworkingV1().Ingresses(h.ns).Get(h.ctx(), "site", metav1.GetOptions{})
		if err != nil {
			return err
		}
		lb := ing.Status.LoadBalancer.Ingress
		if len(lb) != 1 || lb[0].Hostname != "site.tail1.ts.net" || len(lb[0].Ports) != 2 || lb[0].Ports[0].Port != 443 || lb[0].Ports[1].Port != 80 {
			return fmt.Errorf("status %+v", lb)
		}
		return nil
	})

	// The backend is recreated with another ClusterIP: the route follows.
	if err := h.kube.CoreV1().Services(h.ns).Delete(h.ctx(), "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	web2 := h.backend("web", 8080)
	testpoll.Until(t, settle, "route follows the new ClusterIP", func() error {
		cfg, err := h.proxyConfig("ingress", "site")
		if err != nil || cfg.L7.DefaultBackend == nil || cfg.L7.DefaultBackend.Address != web2.Spec.ClusterIP+":8080" {
			return fmt.Errorf("config %+v %v (want %s)", cfg.L7.DefaultBackend, err, web2.Spec.ClusterIP)
		}
		return nil
	})

	if err := h.kube.NetworkingV1().Ingresses(h.ns).Delete(h.ctx(), "site", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testpoll.Until(t, settle, "proxy gone", func() error { return h.proxyGone("ingress", "site") })
	if !slices.Contains(h.api.Deleted(), "nSITE") {
		t.Fatalf("device not deleted: %v", h.api.Deleted())
	}
}

// An Ingress with no rules and no default backend, or whose only backend does
// not exist, gets Events and no proxy; one with a valid and a missing backend
// gets a proxy for the valid one and an Event for the other.
func TestIngressBadBackends(t *testing.T) {
	h := newHarness(t, nil)
	h.createIngressClass(false)
	h.backend("ok", 80)
	// The API requires rules or a default backend: a rule without paths is
	// the emptiest Ingress it accepts.
	h.createIngress("empty", nil, networkingv1.IngressSpec{Rules: []networkingv1.IngressRule{{Host: "empty.example.com"}}})
	h.createIngress("missing", nil, networkingv1.IngressSpec{DefaultBackend: defaultBackend("nope", 80)})
	prefix := networkingv1.PathTypePrefix
	h.createIngress("partial", nil, networkingv1.IngressSpec{Rules: []networkingv1.IngressRule{{
		IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{Paths: []networkingv1.HTTPIngressPath{
			{Path: "/a", PathType: &prefix, Backend: *defaultBackend("ok", 80)},
			{Path: "/b", PathType: &prefix, Backend: *defaultBackend("nope", 80)},
		}}},
	}}})
	h.wantEvent(h.ns, "empty", corev1.EventTypeWarning, "NoValidBackends", "")
	h.wantEvent(h.ns, "missing", corev1.EventTypeWarning, "InvalidIngressBackend", "nope")
	h.wantEvent(h.ns, "missing", corev1.EventTypeWarning, "NoValidBackends", "")
	h.wantEvent(h.ns, "partial", corev1.EventTypeWarning, "InvalidIngressBackend", "nope")
	testpoll.Until(t, settle, "partial proxy", func() error { return h.proxyExists("ingress", "partial") })
	cfg, err := h.proxyConfig("ingress", "partial")
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.L7.Rules) != 1 || len(cfg.L7.Rules[0].Paths) != 1 || cfg.L7.Rules[0].Paths[0].Path != "/a" {
		t.Fatalf("routes: %+v", cfg.L7.Rules)
	}
	for _, name := range []string{"empty", "missing"} {
		if err := h.proxyGone("ingress", name); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	// Creating the missing backend serves it, with no other action.
	h.backend("nope", 80)
	testpoll.Until(t, settle, "missing now served", func() error { return h.proxyExists("ingress", "missing") })
}

// A default-marked tailscale IngressClass is refused (Event on the class and
// on its Ingresses); once the mark is removed the Ingresses are served.
func TestDefaultIngressClassRefused(t *testing.T) {
	h := newHarness(t, nil)
	h.createIngressClass(true)
	h.backend("web", 80)
	h.createIngress("site", nil, networkingv1.IngressSpec{DefaultBackend: defaultBackend("web", 80)})
	h.wantEvent("default", "tailscale", corev1.EventTypeWarning, "DefaultIngressClassRefused", "marked as the default class")
	h.wantEvent(h.ns, "site", corev1.EventTypeWarning, "DefaultIngressClassRefused", "not served")
	if err := h.proxyGone("ingress", "site"); err != nil {
		t.Fatal(err)
	}
	patch := `{"metadata":{"annotations":{"ingressclass.kubernetes.io/is-default-class":null}}}`
	if _, err := h.kube.NetworkingV1().IngressClasses().Patch(h.ctx(), "tailscale", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	testpoll.Until(t, settle, "served after the fix", func() error { return h.proxyExists("ingress", "site") })
}

// An Ingress naming its own certificate (tls secretName) gets a copy of it in
// the operator namespace, readable by its proxy, and the proxy serves it.
func TestIngressCustomTLS(t *testing.T) {
	h := newHarness(t, nil)
	h.createIngressClass(false)
	h.backend("web", 80)
	cert := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "web-cert", Namespace: h.ns}, Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{corev1.TLSCertKey: []byte("CERT"), corev1.TLSPrivateKeyKey: []byte("KEY")}}
	if _, err := h.kube.CoreV1().Secrets(h.ns).Create(h.ctx(), cert, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.createIngress("custom", nil, networkingv1.IngressSpec{
		DefaultBackend: defaultBackend("web", 80),
		TLS:            []networkingv1.IngressTLS{{Hosts: []string{"web.example.com"}, SecretName: "web-cert"}},
	})
	testpoll.Until(t, settle, "proxy", func() error { return h.proxyExists("ingress", "custom") })
	copyName := h.names("ingress", "custom").Base + "-tls"
	copied, err := h.kube.CoreV1().Secrets(h.opNS).Get(h.ctx(), copyName, metav1.GetOptions{})
	if err != nil || string(copied.Data[corev1.TLSCertKey]) != "CERT" || string(copied.Data[corev1.TLSPrivateKeyKey]) != "KEY" {
		t.Fatalf("copy: %+v %v", copied, err)
	}
	cfg, err := h.proxyConfig("ingress", "custom")
	if err != nil || cfg.L7.TLS.Mode != config.TLSSecret || cfg.L7.TLS.SecretName != copyName {
		t.Fatalf("tls config %+v %v", cfg.L7.TLS, err)
	}
	role, err := h.kube.RbacV1().Roles(h.opNS).Get(h.ctx(), h.names("ingress", "custom").Base, metav1.GetOptions{})
	if err != nil || !slices.Contains(role.Rules[0].ResourceNames, copyName) {
		t.Fatalf("Role %+v %v", role, err)
	}
	// A renewed certificate (cert-manager rewrites the Secret in place)
	// reaches the copy the proxy serves, without touching the Ingress.
	cert.Data = map[string][]byte{corev1.TLSCertKey: []byte("RENEWED"), corev1.TLSPrivateKeyKey: []byte("NEWKEY")}
	if _, err := h.kube.CoreV1().Secrets(h.ns).Update(h.ctx(), cert, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	testpoll.Until(t, settle, "renewed certificate copied", func() error {
		c, err := h.kube.CoreV1().Secrets(h.opNS).Get(h.ctx(), copyName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if string(c.Data[corev1.TLSCertKey]) != "RENEWED" || string(c.Data[corev1.TLSPrivateKeyKey]) != "NEWKEY" {
			return fmt.Errorf("copy still holds %q", c.Data[corev1.TLSCertKey])
		}
		return nil
	})
}
