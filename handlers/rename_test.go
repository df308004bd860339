package handlers_test

import (
	"encoding/json"
	"fmt"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/tailplane/tailplane/internal/testpoll"
)

// reportFQDN does what a proxy does once control renamed its device: it
// writes the new device_fqdn into its state Secret.
func (h *harness) reportFQDN(parentType, name, fqdn string) {
	h.t.Helper()
	patch, _ := json.Marshal(map[string]any{"stringData": map[string]string{"device_fqdn": fqdn + "."}})
	state := h.names(parentType, name).StateSecret
	if _, err := h.kube.CoreV1().Secrets(h.opNS).Patch(h.ctx(), state, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		h.t.Fatal(err)
	}
}

// A renamed Service gets the new hostname in its proxy's config, and is
// Ready (with the name in its LoadBalancer status) only once the device
// carries the new name: while it still has the old one, which stops
// resolving, the condition says it waits for the rename.
func TestServiceRenameReadyOnlyUnderTheNewName(t *testing.T) {
	h := newHarness(t, nil)
	svc := loadBalancer("ren", "tailscale")
	svc.Annotations = map[string]string{"tailscale.com/hostname": "first"}
	h.createService(svc)
	testpoll.Until(t, settle, "proxy", func() error { return h.proxyExists("svc", "ren") })
	h.simulateLogin("svc", "ren", "nREN", "first.tail1.ts.net", "100.64.0.20")
	h.wantCondition("ren", "True", "ProxyCreated", "ProxyCreated")

	h.patchService("ren", `{"metadata":{"annotations":{"tailscale.com/hostname":"second"}}}`)
	testpoll.Until(t, settle, "config renamed", func() error {
		cfg, err := h.proxyConfig("svc", "ren")
		if err != nil || cfg.Hostname != "second" {
			return fmt.Errorf("%+v %v", cfg, err)
		}
		return nil
	})
	h.wantCondition("ren", "False", "ProxyPending", "waiting for the device to be renamed: it is still first.tail1.ts.net, not yet second.tail1.ts.net")
	// As for an Ingress, the rename is told as an Event with the new name.
	h.wantEvent(h.ns, "ren", "Normal", "ProxyRenaming", "not yet second.tail1.ts.net")
	if lb := h.service("ren").Status.LoadBalancer.Ingress; len(lb) != 0 {
		t.Fatalf("LoadBalancer status still names the old device: %+v", lb)
	}

	h.reportFQDN("svc", "ren", "second.tail1.ts.net")
	h.wantCondition("ren", "True", "ProxyCreated", "ProxyCreated")
	testpoll.Until(t, settle, "LB status with the new name", func() error {
		lb := h.service("ren").Status.LoadBalancer.Ingress
		if len(lb) != 2 || lb[0].Hostname != "second.tail1.ts.net" || lb[1].IP != "100.64.0.20" {
			return fmt.Errorf("status %+v", lb)
		}
		return nil
	})
}

// An Ingress whose tls host changes reports no address while its device
// still has the old name, and the new name once the device has it.
func TestIngressRenameReportsOnlyTheNewName(t *testing.T) {
	h := newHarness(t, nil)
	h.createIngressClass(false)
	h.backend("web", 8080)
	h.createIngress("site", nil, networkingv1.IngressSpec{
		DefaultBackend: defaultBackend("web", 8080),
		TLS:            []networkingv1.IngressTLS{{Hosts: []string{"one"}}},
	})
	testpoll.Until(t, settle, "proxy", func() error { return h.proxyExists("ingress", "site") })
	h.simulateLogin("ingress", "site", "nSITE", "one.tail1.ts.net", "100.64.0.21")
	status := func(want string) func() error {
		return func() error {
			ing, err := h.kube.NetworkingV1().Ingresses(h.ns).Get(h.ctx(), "site", metav1.GetOptions{})
			if err != nil {
				return err
			}
			lb := ing.Status.LoadBalancer.Ingress
			switch {
			case want == "" && len(lb) != 0:
				return fmt.Errorf("status %+v, want none", lb)
			case want != "" && (len(lb) != 1 || lb[0].Hostname != want):
				return fmt.Errorf("status %+v, want %s", lb, want)
			}
			return nil
		}
	}
	testpoll.Until(t, settle, "status one", status("one.tail1.ts.net"))

	patch := `{"spec":{"tls":[{"hosts":["two"]}]}}`
	if _, err := h.kube.NetworkingV1().Ingresses(h.ns).Patch(h.ctx(), "site", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	testpoll.Until(t, settle, "config renamed", func() error {
		cfg, err := h.proxyConfig("ingress", "site")
		if err != nil || cfg.Hostname != "two" {
			return fmt.Errorf("%+v %v", cfg, err)
		}
		return nil
	})
	testpoll.Until(t, settle, "no status while renaming", status(""))
	h.wantEvent(h.ns, "site", "Normal", "ProxyRenaming", "not yet two.tail1.ts.net")
	h.reportFQDN("ingress", "site", "two.tail1.ts.net")
	testpoll.Until(t, settle, "status two", status("two.tail1.ts.net"))
}
