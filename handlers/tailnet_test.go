package handlers_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/tailplane/tailplane/crds/tailscale/v1alpha1"
	"github.com/tailplane/tailplane/handlers/lib/cluster"
	"github.com/tailplane/tailplane/handlers/lib/pipeline"
	"github.com/tailplane/tailplane/handlers/lib/resources"
	"github.com/tailplane/tailplane/handlers/tailnet"
	"github.com/tailplane/tailplane/internal/proxystate"
	"github.com/tailplane/tailplane/internal/tailnet/tailnettest"
	"github.com/tailplane/tailplane/internal/testpoll"
)

// tailnetFixture is a Tailnet object (named after the test namespace) and
// the fake API of the second tailnet it names.
type tailnetFixture struct {
	*harness
	name   string
	secret string
	api2   *tailnettest.Server
}

// secondTailnet starts a second tailnet API and creates a Tailnet naming
// it, with the credentials Secret secret (not created).
func (h *harness) secondTailnet() *tailnetFixture {
	h.t.Helper()
	f := &tailnetFixture{harness: h, name: "tn-" + h.ns, secret: "creds-" + h.ns, api2: tailnettest.NewServer()}
	h.t.Cleanup(f.api2.Close)
	h.createClusterCR(resources.Tailnets, "Tailnet", f.name,
		fmt.Sprintf(`{"loginUrl":%q,"credentials":{"secretName":%q}}`, f.api2.URL, f.secret))
	return f
}

// setSecret creates or replaces the credentials Secret with data.
func (f *tailnetFixture) setSecret(data map[string]string) {
	f.t.Helper()
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: f.secret, Namespace: f.opNS}, StringData: data}
	secrets := f.kube.CoreV1().Secrets(f.opNS)
	if _, err := secrets.Create(f.ctx(), s, metav1.CreateOptions{}); apierrors.IsAlreadyExists(err) {
		cur, err := secrets.Get(f.ctx(), f.secret, metav1.GetOptions{})
		if err != nil {
			f.t.Fatal(err)
		}
		cur.Data, cur.StringData = nil, data
		if _, err := secrets.Update(f.ctx(), cur, metav1.UpdateOptions{}); err != nil {
			f.t.Fatal(err)
		}
	} else if err != nil {
		f.t.Fatal(err)
	}
}

func (f *tailnetFixture) get() (*v1alpha1.Tailnet, error) {
	u, err := f.dyn.Resource(resources.Tailnets).Get(f.ctx(), f.name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	var tn v1alpha1.Tailnet
	return &tn, cluster.FromUnstructured(u, &tn)
}

func (f *tailnetFixture) wantReady(status, reason, msgPart string) {
	f.t.Helper()
	testpoll.Until(f.t, settle, "TailnetReady "+reason, func() error {
		tn, err := f.get()
		if err != nil {
			return err
		}
		c := meta.FindStatusCondition(tn.Status.Conditions, v1alpha1.TailnetReady)
		if c == nil || string(c.Status) != status || c.Reason != reason || !strings.Contains(c.Message, msgPart) ||
			c.ObservedGeneration != tn.Generation {
			return fmt.Errorf("conditions %+v (generation %d)", tn.Status.Conditions, tn.Generation)
		}
		return nil
	})
}

func (f *tailnetFixture) hasFinalizer() bool {
	tn, err := f.get()
	return err == nil && slices.Contains(tn.Finalizers, "tailscale.com/finalizer")
}

// loginOn does what replica i's proxy does once logged in to api's
// tailnet.
func (g *groupFixture) loginOn(api *tailnettest.Server, i int, domain string) string {
	g.t.Helper()
	cfg, err := g.config(i)
	if err != nil {
		g.t.Fatal(err)
	}
	if !api.UseKey(cfg.AuthKey) {
		g.t.Fatalf("replica %d's auth key %q is not one of this tailnet's", i, cfg.AuthKey)
	}
	id, fqdn, ip := fmt.Sprintf("n2PG%d", i), cfg.Hostname+"."+domain, fmt.Sprintf("100.64.3.%d", i+1)
	api.AddDevice(tailnettest.Device{ID: id, Name: fqdn, Addresses: []string{ip}})
	g.writeState(i, map[string][]byte{proxystate.KeyDeviceID: []byte(id),
		proxystate.KeyDeviceFQDN: []byte(fqdn + "."), proxystate.KeyDeviceIPs: fmt.Appendf(nil, `[%q]`, ip)})
	g.pod(i, fmt.Sprintf("10.1.1.%d", 10+i), true)
	return id
}

// TestTailnetStatusReasons: a Tailnet reports its Secret missing, then
// incomplete, then credentials the second tailnet's API refuses
// (InvalidOAuth), then valid ones; each change of the Secret is checked
// at once. The finalizer comes only with validity.
func TestTailnetStatusReasons(t *testing.T) {
	h := newHarness(t, nil)
	f := h.secondTailnet()
	f.wantReady("False", tailnet.ReasonInvalidSecret, fmt.Sprintf("referenced secret %q does not exist in namespace %q", f.secret, h.opNS))
	h.wantEvent("default", f.name, corev1.EventTypeWarning, tailnet.ReasonInvalidSecret, "does not exist")
	if f.hasFinalizer() {
		t.Fatal("an invalid Tailnet got the finalizer")
	}

	f.setSecret(map[string]string{tailnet.KeyClientID: tailnettest.ClientID})
	f.wantReady("False", tailnet.ReasonInvalidSecret, "must contain either a client_secret or an audience field")

	f.setSecret(map[string]string{tailnet.KeyClientID: tailnettest.ClientID, tailnet.KeyClientSecret: "wrong"})
	f.wantReady("False", tailnet.ReasonInvalidOAuth, "failed to list devices")
	h.wantEvent("default", f.name, corev1.EventTypeWarning, tailnet.ReasonInvalidOAuth, "failed to list auth keys")

	f.setSecret(map[string]string{tailnet.KeyClientID: tailnettest.ClientID, tailnet.KeyClientSecret: tailnettest.ClientSecret})
	f.wantReady("True", tailnet.ReasonValid, tailnet.ReasonValid)
	testpoll.UntilTrue(t, settle, "finalizer on the valid Tailnet", f.hasFinalizer)

	// A scope missing from the OAuth client is found by the probe; the
	// check is repeated after 30 s, or at once when the Tailnet changes.
	f.api2.Fail(tailnettest.EndpointListKeys, tailnettest.Failure{Status: 403, Message: "missing scope auth_keys"})
	h.patchSpec(resources.Tailnets, f.name, fmt.Sprintf(`{"loginUrl":%q}`, f.api2.URL+"/"))
	f.wantReady("False", tailnet.ReasonInvalidOAuth, "failed to list auth keys")
	f.api2.Recover(tailnettest.EndpointListKeys)
	h.patchSpec(resources.Tailnets, f.name, fmt.Sprintf(`{"loginUrl":%q}`, f.api2.URL))
	f.wantReady("True", tailnet.ReasonValid, tailnet.ReasonValid)
}

// TestProxyGroupOnSecondTailnet: a ProxyGroup naming a Tailnet waits for
// it (ProxyGroupTailnetUnavailable), then its replicas get auth keys minted
// by the second tailnet's API and its login server; its members'
// Tailscale Services are created there; scale-down deletes the device
// there; deleting the Tailnet in use makes the group say so; the group's
// deletion then leaves the devices, with an Event.
func TestProxyGroupOnSecondTailnet(t *testing.T) {
	h := newHarness(t, nil)
	h.createIngressClass(false)
	f := h.secondTailnet()
	g := h.proxyGroup(fmt.Sprintf(`{"type":"ingress","tailnet":%q}`, f.name))
	g.wantCondition(v1alpha1.ProxyGroupReady, "False", v1alpha1.ReasonProxyGroupTailnetUnavailable, f.name)
	h.wantEvent("default", g.name, corev1.EventTypeWarning, v1alpha1.ReasonProxyGroupTailnetUnavailable, f.name)

	f.setSecret(map[string]string{tailnet.KeyClientID: tailnettest.ClientID, tailnet.KeyClientSecret: tailnettest.ClientSecret})
	f.wantReady("True", tailnet.ReasonValid, "")
	g.wantCondition(v1alpha1.ProxyGroupReady, "False", v1alpha1.ReasonProxyGroupCreating, "")
	g.wantHosted(0)
	g.wantHosted(1)
	for i := range 2 {
		cfg, err := g.config(i)
		if err != nil || cfg.LoginServer != f.api2.URL || cfg.AuthKey == "" {
			t.Fatalf("replica %d config %+v %v", i, cfg, err)
		}
	}
	if n := len(f.api2.Keys()); n != 2 {
		t.Fatalf("the second tailnet minted %d keys, want 2", n)
	}
	if keys := h.api.Keys(); len(keys) != 0 {
		t.Fatalf("the operator's tailnet minted keys for the group: %+v", keys)
	}
	g.loginOn(f.api2, 0, "tail2.ts.net")
	dev1 := g.loginOn(f.api2, 1, "tail2.ts.net")
	g.wantCondition(v1alpha1.ProxyGroupReady, "True", v1alpha1.ReasonProxyGroupReady, "")

	// A restart: the group waits for its Tailnet's check without saying
	// it is unavailable, and nothing is minted again.
	h.restart()
	testpoll.AlwaysTrue(t, 3*time.Second, "the group stays Ready across the restart", func() bool {
		c := meta.FindStatusCondition(g.get().Status.Conditions, v1alpha1.ProxyGroupReady)
		return c != nil && c.Status == metav1.ConditionTrue
	})
	if n := len(f.api2.Keys()); n != 2 {
		t.Fatalf("after the restart the second tailnet minted %d keys, want 2", n)
	}

	// An Ingress of the group: its Tailscale Service is the second
	// tailnet's.
	h.backend("web", 80)
	h.createIngress("web", map[string]string{"tailscale.com/proxy-group": g.name},
		networkingv1.IngressSpec{DefaultBackend: defaultBackend("web", 80), TLS: tlsHost("web")})
	testpoll.Until(t, settle, "svc:web in the second tailnet", func() error {
		if _, ok := f.api2.Services()["svc:web"]; !ok {
			return fmt.Errorf("services %v", f.api2.Services())
		}
		return nil
	})
	if _, ok := h.api.Services()["svc:web"]; ok {
		t.Fatal("svc:web was created in the operator's tailnet")
	}
	g.wantHosted(0, "svc:web")
	if err := h.kube.NetworkingV1().Ingresses(h.ns).Delete(h.ctx(), "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testpoll.Until(t, settle, "svc:web deleted from the second tailnet", func() error {
		if _, ok := f.api2.Services()["svc:web"]; ok {
			return fmt.Errorf("still there")
		}
		return nil
	})

	// Scale-down deletes the device in the second tailnet.
	g.patch(`{"replicas":1}`)
	testpoll.UntilTrue(t, settle, "replica 1's device deleted in the second tailnet", func() bool {
		return slices.Contains(f.api2.Deleted(), dev1)
	})
	if d := h.api.Deleted(); len(d) != 0 {
		t.Fatalf("devices deleted in the operator's tailnet: %v", d)
	}

	// Deleting the Tailnet in use: gone at once, as the official operator
	// does; the group says its tailnet is unavailable.
	if err := h.dyn.Resource(resources.Tailnets).Delete(h.ctx(), f.name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testpoll.UntilTrue(t, settle, "Tailnet gone", func() bool { _, err := f.get(); return apierrors.IsNotFound(err) })
	g.wantCondition(v1alpha1.ProxyGroupReady, "False", v1alpha1.ReasonProxyGroupTailnetUnavailable, "no such Tailnet")

	// The group's deletion cannot reach the devices any more: it goes,
	// and says so.
	if err := h.dyn.Resource(resources.ProxyGroups).Delete(h.ctx(), g.name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	h.wantEvent("default", g.name, corev1.EventTypeWarning, pipeline.ReasonTailnetGone, "left in that tailnet")
	testpoll.UntilTrue(t, settle, "ProxyGroup gone", func() bool {
		_, err := h.dyn.Resource(resources.ProxyGroups).Get(h.ctx(), g.name, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})
}

// TestConnectorOnSecondTailnet: a Connector naming a Tailnet reports it
// unavailable, then its replica gets a key of the second tailnet and its
// login server; deleting the Connector deletes the device there.
func TestConnectorOnSecondTailnet(t *testing.T) {
	h := newHarness(t, nil)
	f := h.secondTailnet()
	c := h.connector(fmt.Sprintf(`{"subnetRouter":{"advertiseRoutes":["10.42.0.0/16"]},"tailnet":%q}`, f.name))
	testpoll.Until(t, settle, "ConnectorCreationFailed naming the Tailnet", func() error {
		for _, cond := range c.get().Status.Conditions {
			if cond.Reason == "ConnectorCreationFailed" && strings.Contains(cond.Message, f.name) {
				return nil
			}
		}
		return fmt.Errorf("conditions %+v", c.get().Status.Conditions)
	})
	f.setSecret(map[string]string{tailnet.KeyClientID: tailnettest.ClientID, tailnet.KeyClientSecret: tailnettest.ClientSecret})
	var cfgKey string
	testpoll.Until(t, settle, "replica 0 config on the second tailnet", func() error {
		cfg, err := c.config(0)
		if err != nil {
			return err
		}
		if cfg.LoginServer != f.api2.URL || cfg.AuthKey == "" {
			return fmt.Errorf("config %+v", cfg)
		}
		cfgKey = cfg.AuthKey
		return nil
	})
	if !f.api2.UseKey(cfgKey) || len(h.api.Keys()) != 0 {
		t.Fatalf("the key is not the second tailnet's (operator's tailnet minted %d)", len(h.api.Keys()))
	}
	f.api2.AddDevice(tailnettest.Device{ID: "n2CN0", Name: c.name + "-0.tail2.ts.net", Addresses: []string{"100.64.4.1"}})
	patch, _ := json.Marshal(map[string]any{"data": map[string][]byte{proxystate.KeyDeviceID: []byte("n2CN0"),
		proxystate.KeyDeviceFQDN: []byte(c.name + "-0.tail2.ts.net."), proxystate.KeyDeviceIPs: []byte(`["100.64.4.1"]`)}})
	if _, err := h.kube.CoreV1().Secrets(h.opNS).Patch(h.ctx(), c.replica(0).StateSecret, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := h.dyn.Resource(resources.Connectors).Delete(h.ctx(), c.name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testpoll.UntilTrue(t, settle, "the device deleted in the second tailnet", func() bool {
		return slices.Contains(f.api2.Deleted(), "n2CN0")
	})
}

// TestServiceOptsIntoSecondTailnet: Tailplane's tailplane.dev/tailnet puts
// an exposed Service's own proxy on the second tailnet; removing it moves
// the proxy back: the device in the second tailnet is deleted and a key of
// the operator's tailnet minted.
func TestServiceOptsIntoSecondTailnet(t *testing.T) {
	h := newHarness(t, nil)
	f := h.secondTailnet()
	h.createService(exposed("web", map[string]string{pipeline.AnnotationTailnet: f.name}))
	h.wantCondition("web", "False", "ProxyFailed", "not ready: referenced secret")
	f.setSecret(map[string]string{tailnet.KeyClientID: tailnettest.ClientID, tailnet.KeyClientSecret: tailnettest.ClientSecret})
	var key string
	testpoll.Until(t, settle, "config on the second tailnet", func() error {
		cfg, err := h.proxyConfig("svc", "web")
		if err != nil || cfg.LoginServer != f.api2.URL || cfg.AuthKey == "" {
			return fmt.Errorf("config %+v %v", cfg, err)
		}
		key = cfg.AuthKey
		return nil
	})
	if !f.api2.UseKey(key) || len(h.api.Keys()) != 0 {
		t.Fatal("the proxy's key is not the second tailnet's")
	}
	f.api2.AddDevice(tailnettest.Device{ID: "n2WEB", Name: h.ns + "-web.tail2.ts.net", Addresses: []string{"100.64.5.1"}})
	patch, _ := json.Marshal(map[string]any{"data": map[string][]byte{proxystate.KeyDeviceID: []byte("n2WEB"),
		proxystate.KeyDeviceFQDN: []byte(h.ns + "-web.tail2.ts.net."), proxystate.KeyDeviceIPs: []byte(`["100.64.5.1"]`)}})
	if _, err := h.kube.CoreV1().Secrets(h.opNS).Patch(h.ctx(), h.names("svc", "web").StateSecret, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	h.wantCondition("web", "True", "ProxyCreated", "ProxyCreated")

	h.patchService("web", fmt.Sprintf(`{"metadata":{"annotations":{%q:null}}}`, pipeline.AnnotationTailnet))
	testpoll.UntilTrue(t, settle, "the device deleted in the second tailnet", func() bool {
		return slices.Contains(f.api2.Deleted(), "n2WEB")
	})
	testpoll.Until(t, settle, "config on the operator's tailnet", func() error {
		cfg, err := h.proxyConfig("svc", "web")
		if err != nil || cfg.LoginServer != h.api.URL || cfg.AuthKey == "" || len(h.api.Keys()) != 1 {
			return fmt.Errorf("config %+v %v, keys %d", cfg, err, len(h.api.Keys()))
		}
		return nil
	})
}
