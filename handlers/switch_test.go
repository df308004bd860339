package handlers_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tailplane/tailplane/handlers/lib/cluster"
	"github.com/tailplane/tailplane/handlers/lib/proxyset"
	"github.com/tailplane/tailplane/internal/proxystate"
	"github.com/tailplane/tailplane/internal/tailnet/tailnettest"
	"github.com/tailplane/tailplane/internal/testpoll"
	"github.com/tailplane/tailplane/proxy/config"
)

// Exposed and egress Services are two modules with their own proxies: a
// Service switched from one to the other loses the first proxy (device
// included) and gets the second, in either direction, whatever order the
// modules run in.
func TestServiceSwitchedBetweenExposeAndEgress(t *testing.T) {
	h := newHarness(t, nil)
	h.createService(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "sw",
		Annotations: map[string]string{"tailscale.com/expose": "true", "tailscale.com/hostname": "sw"}},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "sw"}}})
	testpoll.Until(t, settle, "expose proxy", func() error { return h.proxyExists("svc", "sw") })
	h.simulateLogin("svc", "sw", "nExpose", "sw.tail1.ts.net", "100.64.0.7")
	h.wantCondition("sw", "True", "ProxyCreated", "")

	h.patchService("sw", `{"metadata":{"annotations":{"tailscale.com/expose":null,"tailscale.com/tailnet-fqdn":"db.tail1.ts.net"}}}`)
	testpoll.Until(t, settle, "expose proxy replaced by an egress proxy", func() error {
		if err := h.proxyGone("svc", "sw"); err != nil {
			return err
		}
		return h.proxyExists("egress", "sw")
	})
	if !slices.Contains(h.api.Deleted(), "nExpose") {
		t.Fatalf("the exposed Service's device was not deleted: %v", h.api.Deleted())
	}
	cfg, err := h.proxyConfig("egress", "sw")
	if err != nil || cfg.Role != config.RoleEgress || cfg.Hostname != "sw" {
		t.Fatalf("egress config %+v, %v", cfg, err)
	}
	h.simulateLogin("egress", "sw", "nEgress", "sw.tail1.ts.net", "100.64.0.8")
	h.wantCondition("sw", "True", "ProxyCreated", "")

	// Back: egress Services are ExternalNames by now; exposing one
	// forwards to its externalName.
	h.patchService("sw", `{"metadata":{"annotations":{"tailscale.com/expose":"true","tailscale.com/tailnet-fqdn":null}},"spec":{"externalName":"db.example.com"}}`)
	testpoll.Until(t, settle, "egress proxy replaced by an expose proxy", func() error {
		if err := h.proxyGone("egress", "sw"); err != nil {
			return err
		}
		return h.proxyExists("svc", "sw")
	})
	if !slices.Contains(h.api.Deleted(), "nEgress") {
		t.Fatalf("the egress device was not deleted: %v", h.api.Deleted())
	}
}

// Releases before egress had its own object names named an egress proxy
// like an exposed Service's, with one config Secret "<base>-config". After
// an upgrade that proxy and its device are replaced by one under the egress
// names; nothing of it is left.
func TestUpgradeReplacesEgressProxyOfTheSingleReplicaRelease(t *testing.T) {
	h := newHarness(t, nil)
	h.stop()
	old := h.names("svc", "db")
	parent := proxyset.Parent{Type: proxyset.ParentService, Namespace: h.ns, Name: "db", Role: cluster.RoleEgress}
	labels := func(secretType string) map[string]string {
		l := parent.Labels()
		l[proxystate.LabelSecretType] = secretType
		if secretType == proxyset.SecretTypeConfig {
			delete(l, proxyset.LabelProxyRole) // that release labelled only state Secrets
			l[cluster.LabelHostname] = h.ns + "-db-egress"
		}
		return l
	}
	ips, _ := json.Marshal([]string{"100.64.0.5"})
	for _, s := range []*corev1.Secret{
		{ObjectMeta: metav1.ObjectMeta{Name: old.LegacyConfigSecret(), Labels: labels(proxyset.SecretTypeConfig)},
			Data: map[string][]byte{config.SecretKey: []byte(`{"version":1}`)}},
		{ObjectMeta: metav1.ObjectMeta{Name: old.StateSecret, Labels: labels(proxyset.SecretTypeState)},
			Data: map[string][]byte{proxystate.KeyDeviceID: []byte("nOld"), proxystate.KeyDeviceFQDN: []byte("old.tail1.ts.net."), proxystate.KeyDeviceIPs: ips}},
	} {
		if _, err := h.kube.CoreV1().Secrets(h.opNS).Create(h.ctx(), s, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	h.api.AddDevice(tailnettest.Device{ID: "nOld", Name: "old.tail1.ts.net"})
	h.createService(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "db",
		Annotations: map[string]string{"tailscale.com/tailnet-fqdn": "db.tail1.ts.net"}}})
	h.start()
	testpoll.Until(t, settle, "old egress proxy replaced", func() error {
		for _, name := range []string{old.LegacyConfigSecret(), old.StateSecret} {
			if _, err := h.kube.CoreV1().Secrets(h.opNS).Get(h.ctx(), name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				return fmt.Errorf("Secret %s: %v", name, err)
			}
		}
		if !slices.Contains(h.api.Deleted(), "nOld") {
			return fmt.Errorf("old device not deleted: %v", h.api.Deleted())
		}
		return h.proxyExists("egress", "db")
	})
}

// A proxy of the single-replica release keeps its device across the
// upgrade: its state Secret is replica 0's, and only its config Secret,
// now "<base>-0-config", moves.
func TestUpgradeKeepsTheDeviceOfASingleReplicaProxy(t *testing.T) {
	h := newHarness(t, nil)
	h.createService(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web",
		Annotations: map[string]string{"tailscale.com/expose": "true"}}})
	testpoll.Until(t, settle, "proxy", func() error { return h.proxyExists("svc", "web") })
	h.simulateLogin("svc", "web", "nWeb", h.ns+"-web.tail1.ts.net", "100.64.0.3")
	h.wantCondition("web", "True", "ProxyCreated", "")
	h.stop()
	n := h.names("svc", "web")
	current, err := h.kube.CoreV1().Secrets(h.opNS).Get(h.ctx(), n.ConfigSecret, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	legacy := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: n.LegacyConfigSecret(), Labels: current.Labels}, Data: current.Data}
	if _, err := h.kube.CoreV1().Secrets(h.opNS).Create(h.ctx(), legacy, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := h.kube.CoreV1().Secrets(h.opNS).Delete(h.ctx(), n.ConfigSecret, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	h.start()
	testpoll.Until(t, settle, "config Secret moved", func() error {
		if _, err := h.kube.CoreV1().Secrets(h.opNS).Get(h.ctx(), n.LegacyConfigSecret(), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("legacy config Secret: %v", err)
		}
		return h.proxyExists("svc", "web")
	})
	h.wantCondition("web", "True", "ProxyCreated", "")
	if slices.Contains(h.api.Deleted(), "nWeb") {
		t.Fatal("the upgrade deleted the proxy's device")
	}
	if n := len(h.api.Keys()); n != 1 {
		t.Fatalf("%d auth keys minted, want 1: a logged-in proxy needs no new key", n)
	}
}
