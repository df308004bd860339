package handlers_test

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tailplane/tailplane/internal/testpoll"
	"github.com/tailplane/tailplane/proxy/config"
)

// An egress Service gets an egress proxy and a headless Service, and is
// rewritten to an ExternalName pointing at it; an invalid one is refused.
func TestEgressService(t *testing.T) {
	h := newHarness(t, nil)
	h.createService(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "db",
		Annotations: map[string]string{"tailscale.com/tailnet-fqdn": "db.tail1.ts.net"}}})
	h.createService(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "bad",
		Annotations: map[string]string{"tailscale.com/tailnet-ip": "300.1.1.1"}}})
	testpoll.Until(t, settle, "egress proxy", func() error { return h.proxyExists("egress", "db") })
	cfg, err := h.proxyConfig("egress", "db")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Role != config.RoleEgress || cfg.Egress.Targets[0].FQDN != "db.tail1.ts.net." {
		t.Fatalf("config %+v", cfg.Egress)
	}
	base := h.names("egress", "db").Base
	if _, err := h.kube.CoreV1().Services(h.opNS).Get(h.ctx(), base, metav1.GetOptions{}); err != nil {
		t.Fatalf("headless Service: %v", err)
	}
	want := fmt.Sprintf("%s.%s.svc.cluster.local", base, h.opNS)
	testpoll.Until(t, settle, "ExternalName rewrite", func() error {
		svc := h.service("db")
		if svc.Spec.Type != corev1.ServiceTypeExternalName || svc.Spec.ExternalName != want || len(svc.Spec.Selector) > 0 {
			return fmt.Errorf("spec %+v", svc.Spec)
		}
		return nil
	})
	h.wantCondition("bad", "False", "ProxyInvalid", "could not be parsed as a valid IP Address")
	h.wantEvent(h.ns, "bad", corev1.EventTypeWarning, "INVALIDSERVICE", "300.1.1.1")

	if err := h.kube.CoreV1().Services(h.ns).Delete(h.ctx(), "db", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testpoll.Until(t, settle, "egress proxy gone", func() error {
		if err := h.proxyGone("egress", "db"); err != nil {
			return err
		}
		if _, err := h.kube.CoreV1().Services(h.opNS).Get(h.ctx(), base, metav1.GetOptions{}); err == nil {
			return fmt.Errorf("headless Service still there")
		}
		return nil
	})
}
