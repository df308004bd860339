package handlers_test

import (
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tailplane/tailplane/crds/tailscale/v1alpha1"
	"github.com/tailplane/tailplane/handlers/ingress"
	"github.com/tailplane/tailplane/handlers/lib/groupmember"
	"github.com/tailplane/tailplane/handlers/lib/resources"
	"github.com/tailplane/tailplane/handlers/proxygroup"
	"github.com/tailplane/tailplane/internal/tailnet"
	"github.com/tailplane/tailplane/internal/testpoll"
	"github.com/tailplane/tailplane/proxy/config"
)

// headscaleLike is the operator's backend on a control server with
// Headscale's gaps: no Tailscale Services, no ts.net certificates, no
// Funnel. The
// calls go to the fake Tailscale API as before; only the features differ
// (the Headscale backend's own calls are tested in internal/tailnet
// against a real headscale).
type headscaleLike struct{ tailnet.Backend }

func (headscaleLike) Supports(f tailnet.Feature) bool {
	return f != tailnet.FeatureServices && f != tailnet.FeatureCertificates && f != tailnet.FeatureFunnel
}

func (headscaleLike) ControlName() string { return "Headscale" }

func newHeadscaleHarness(t *testing.T) *harness {
	h := newHarness(t, nil)
	h.stop()
	h.control = func(b tailnet.Backend) tailnet.Backend { return headscaleLike{b} }
	h.start()
	return h
}

// On a control server without Tailscale Services, a ProxyGroup of type
// ingress is refused with its condition and a Warning Event naming the
// missing feature, and gets no replicas; an Ingress asking to be served by
// it is refused too. An egress ProxyGroup (no Services needed) is not.
func TestHeadscaleRefusesProxyGroupsThatNeedServices(t *testing.T) {
	h := newHeadscaleHarness(t)
	g := h.proxyGroup(`{"type":"ingress","replicas":1}`)
	g.wantCondition(v1alpha1.ProxyGroupReady, "False", v1alpha1.ReasonProxyGroupInvalid, "needs Tailscale Services, which the control server (Headscale at ")
	h.wantEvent("default", g.name, corev1.EventTypeWarning, proxygroup.ReasonInvalid, "a ProxyGroup of type ingress (high availability through Tailscale Services) needs Tailscale Services")
	if _, err := g.config(0); err == nil {
		t.Fatal("a refused ProxyGroup got a replica config")
	}

	h.createIngressClass(false)
	h.backend("web", 8080)
	h.createIngress("ha", map[string]string{groupmember.AnnotationProxyGroup: g.name}, networkingv1.IngressSpec{
		DefaultBackend: defaultBackend("web", 8080), TLS: tlsHost("ha")})
	h.wantEvent(h.ns, "ha", corev1.EventTypeWarning, groupmember.ReasonIngressSvcInvalid, fmt.Sprintf("this Ingress, served by ProxyGroup %q, needs Tailscale Services", g.name))

	eg := &groupFixture{harness: h, name: "eg-" + h.ns}
	h.createClusterCR(resources.ProxyGroups, "ProxyGroup", eg.name, `{"type":"egress","replicas":1}`)
	testpoll.Until(t, settle, "egress replica config", func() error {
		_, err := eg.config(0)
		return err
	})
}

// On a control server without ts.net certificates, an Ingress without
// tls.secretName is refused with a Warning Event that names the missing
// feature and both ways out, and gets no proxy; with the http-endpoint
// annotation it is served as plain HTTP on port 80 with no HTTPS listener
// (and its status says port 80); with its own certificate it serves that.
func TestHeadscaleIngressCertificates(t *testing.T) {
	h := newHeadscaleHarness(t)
	h.createIngressClass(false)
	h.backend("web", 8080)
	h.createIngress("tsnet-cert", nil, networkingv1.IngressSpec{DefaultBackend: defaultBackend("web", 8080), TLS: tlsHost("tsnet-cert")})
	h.wantEvent(h.ns, "tsnet-cert", corev1.EventTypeWarning, ingress.ReasonInvalidIngress,
		"an Ingress without tls[0].secretName needs HTTPS certificates for MagicDNS names (ts.net certificates), which the control server (Headscale at ")
	h.wantEvent(h.ns, "tsnet-cert", corev1.EventTypeWarning, ingress.ReasonInvalidIngress, `tailscale.com/http-endpoint: "enabled"`)
	if err := h.proxyGone("ingress", "tsnet-cert"); err != nil {
		t.Fatal(err)
	}

	h.createIngress("plain", map[string]string{ingress.AnnotationHTTPEndpoint: "enabled"}, networkingv1.IngressSpec{DefaultBackend: defaultBackend("web", 8080), TLS: tlsHost("plain")})
	testpoll.Until(t, settle, "plain HTTP proxy", func() error { return h.proxyExists("ingress", "plain") })
	cfg, err := h.proxyConfig("ingress", "plain")
	if err != nil || cfg.L7.TLS.Mode != config.TLSNone || !cfg.L7.PlainHTTP || cfg.L7.HTTPRedirect {
		t.Fatalf("config %+v %v: want TLS mode none and plain HTTP", cfg, err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("the rendered config is invalid: %v", err)
	}
	h.simulateLogin("ingress", "plain", "7", "plain.headscale.test", "100.64.0.7")
	testpoll.Until(t, settle, "status on port 80", func() error {
		ing, err := h.kube.NetworkingV1().Ingresses(h.ns).Get(h.ctx(), "plain", metav1.GetOptions{})
		if err != nil {
			return err
		}
		lb := ing.Status.LoadBalancer.Ingress
		if len(lb) != 1 || lb[0].Hostname != "plain.headscale.test" || len(lb[0].Ports) != 1 || lb[0].Ports[0].Port != 80 {
			return fmt.Errorf("status %+v", lb)
		}
		return nil
	})

	cert := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "own-cert", Namespace: h.ns}, Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{corev1.TLSCertKey: []byte("CERT"), corev1.TLSPrivateKeyKey: []byte("KEY")}}
	if _, err := h.kube.CoreV1().Secrets(h.ns).Create(h.ctx(), cert, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.createIngress("own", nil, networkingv1.IngressSpec{DefaultBackend: defaultBackend("web", 8080),
		TLS: []networkingv1.IngressTLS{{Hosts: []string{"own.example.com"}, SecretName: "own-cert"}}})
	testpoll.Until(t, settle, "proxy with the user's certificate", func() error {
		cfg, err := h.proxyConfig("ingress", "own")
		if err != nil {
			return err
		}
		if cfg.L7.TLS.Mode != config.TLSSecret || !strings.HasSuffix(cfg.L7.TLS.SecretName, "-tls") {
			return fmt.Errorf("tls %+v", cfg.L7.TLS)
		}
		return nil
	})
}

// On a control server without Funnel, an Ingress with tailscale.com/funnel
// gets a Warning Event FunnelNotAllowed naming the missing feature, and is
// served on the tailnet only: its proxy's config asks for no Funnel
// listener (which would fail), and the Ingress's status names the proxy.
func TestHeadscaleIngressFunnelIsRefusedUpFront(t *testing.T) {
	h := newHeadscaleHarness(t)
	h.createIngressClass(false)
	h.backend("web", 8080)
	h.createIngress("public", map[string]string{ingress.AnnotationFunnel: "true", ingress.AnnotationHTTPEndpoint: "enabled"},
		networkingv1.IngressSpec{DefaultBackend: defaultBackend("web", 8080), TLS: tlsHost("public")})
	h.wantEvent(h.ns, "public", corev1.EventTypeWarning, ingress.ReasonFunnelNotAllowed,
		`tailscale.com/funnel "true" needs Tailscale Funnel, which the control server (Headscale at `)
	h.wantEvent(h.ns, "public", corev1.EventTypeWarning, ingress.ReasonFunnelNotAllowed, "served on the tailnet only")
	testpoll.Until(t, settle, "proxy", func() error { return h.proxyExists("ingress", "public") })
	cfg, err := h.proxyConfig("ingress", "public")
	if err != nil || cfg.L7.Funnel || !cfg.L7.PlainHTTP {
		t.Fatalf("config %+v %v: want plain HTTP without Funnel", cfg, err)
	}
	h.simulateLogin("ingress", "public", "8", "public.headscale.test", "100.64.0.8")
	h.wantIngressAddress("public", "public.headscale.test")
}
