package handlers_test

import (
	"fmt"
	"net"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"

	"github.com/tailplane/tailplane/handlers/lib/ingressroutes"
	"github.com/tailplane/tailplane/internal/testpoll"
)

// tailplane.dev/extra-backends offers more Services to plugins on every
// route of the Ingress. The operator resolves them like rule backends, says
// which entries it cannot serve, and re-renders when one appears.
func TestIngressExtraBackends(t *testing.T) {
	h := newHarness(t, nil)
	h.createIngressClass(false)
	web := h.backend("web", 80)
	h.createIngress("site", map[string]string{ingressroutes.AnnotationExtraBackends: "web-canary:80, not-a-pair"},
		networkingv1.IngressSpec{DefaultBackend: defaultBackend("web", 80)})
	h.wantEvent(h.ns, "site", corev1.EventTypeWarning, "InvalidIngressBackend", `entry "not-a-pair" is not <service>:<port>`)
	h.wantEvent(h.ns, "site", corev1.EventTypeWarning, "InvalidIngressBackend", "Service "+h.ns+"/web-canary not found")
	testpoll.Until(t, settle, "proxy without the missing extra backend", func() error {
		cfg, err := h.proxyConfig("ingress", "site")
		if err != nil {
			return err
		}
		if cfg.L7.DefaultBackend == nil || cfg.L7.DefaultBackend.Service != h.ns+"/web:80" || len(cfg.L7.ExtraBackends) != 0 {
			return fmt.Errorf("l7 %+v", cfg.L7)
		}
		return nil
	})
	if web.Spec.ClusterIP == "" {
		t.Fatal("no ClusterIP")
	}

	// The canary Service appears: the proxy config offers it, named as the
	// operator names every backend and reached at its ClusterIP.
	canary := h.backend("web-canary", 80)
	testpoll.Until(t, settle, "the extra backend in the proxy config", func() error {
		cfg, err := h.proxyConfig("ingress", "site")
		if err != nil {
			return err
		}
		want := net.JoinHostPort(canary.Spec.ClusterIP, "80")
		if len(cfg.L7.ExtraBackends) != 1 || cfg.L7.ExtraBackends[0].Service != h.ns+"/web-canary:80" || cfg.L7.ExtraBackends[0].Address != want {
			return fmt.Errorf("extraBackends %+v, want %s/web-canary:80 at %s", cfg.L7.ExtraBackends, h.ns, want)
		}
		return nil
	})
}
