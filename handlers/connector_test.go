package handlers_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/tailplane/tailplane/crds/tailscale/v1alpha1"
	"github.com/tailplane/tailplane/handlers/lib/cluster"
	"github.com/tailplane/tailplane/handlers/lib/proxyset"
	"github.com/tailplane/tailplane/handlers/lib/resources"
	"github.com/tailplane/tailplane/internal/proxystate"
	"github.com/tailplane/tailplane/internal/tailnet/tailnettest"
	"github.com/tailplane/tailplane/internal/testpoll"
	"github.com/tailplane/tailplane/proxy/config"
)

// connectorFixture drives one Connector (cluster-scoped: its name carries
// the test namespace so that no other test's operator sees it as its own).
type connectorFixture struct {
	*harness
	name string
}

func (h *harness) connector(spec string) *connectorFixture {
	h.t.Helper()
	c := &connectorFixture{harness: h, name: "cn-" + h.ns}
	h.createClusterCR(resources.Connectors, "Connector", c.name, spec)
	return c
}

func (c *connectorFixture) patch(spec string) {
	c.t.Helper()
	c.patchSpec(resources.Connectors, c.name, spec)
}

func (c *connectorFixture) get() *v1alpha1.Connector {
	c.t.Helper()
	u, err := c.dyn.Resource(resources.Connectors).Get(c.ctx(), c.name, metav1.GetOptions{})
	if err != nil {
		c.t.Fatal(err)
	}
	var cn v1alpha1.Connector
	if err := cluster.FromUnstructured(u, &cn); err != nil {
		c.t.Fatal(err)
	}
	return &cn
}

func (c *connectorFixture) replica(i int) proxyset.Names {
	return proxyset.Parent{Type: "connector", Name: c.name}.Names().Replica(i)
}

func (c *connectorFixture) config(i int) (*config.Config, error) {
	s, err := c.kube.CoreV1().Secrets(c.opNS).Get(c.ctx(), c.replica(i).ConfigSecret, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	return config.Parse(s.Data[config.SecretKey])
}

// login does what replica i's proxy does once logged in.
func (c *connectorFixture) login(i int) string {
	c.t.Helper()
	cfg, err := c.config(i)
	if err != nil {
		c.t.Fatal(err)
	}
	c.api.UseKey(cfg.AuthKey)
	id, fqdn, ip := fmt.Sprintf("nCN%d", i), cfg.Hostname+".tail1.ts.net", fmt.Sprintf("100.64.1.%d", i+1)
	c.api.AddDevice(tailnettest.Device{ID: id, Name: fqdn, Addresses: []string{ip}})
	patch, _ := json.Marshal(map[string]any{"data": map[string][]byte{proxystate.KeyDeviceID: []byte(id),
		proxystate.KeyDeviceFQDN: []byte(fqdn + "."), proxystate.KeyDeviceIPs: fmt.Appendf(nil, `[%q]`, ip)}})
	if _, err := c.kube.CoreV1().Secrets(c.opNS).Patch(c.ctx(), c.replica(i).StateSecret, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		c.t.Fatal(err)
	}
	return id
}

// reportRoutes does what replica i's proxy does when its advertised or
// approved routes change.
func (c *connectorFixture) reportRoutes(i int, advertised, approved []string) {
	c.t.Helper()
	adv, _ := json.Marshal(append([]string{}, advertised...))
	ok, _ := json.Marshal(append([]string{}, approved...))
	patch, _ := json.Marshal(map[string]any{"data": map[string][]byte{proxystate.KeyDeviceAdvertisedRoutes: adv, proxystate.KeyDeviceApprovedRoutes: ok}})
	if _, err := c.kube.CoreV1().Secrets(c.opNS).Patch(c.ctx(), c.replica(i).StateSecret, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		c.t.Fatal(err)
	}
}

func (c *connectorFixture) wantReady(status, reason, msgPart string, devices int) {
	c.t.Helper()
	testpoll.Until(c.t, settle, "ConnectorReady "+reason, func() error {
		cn := c.get()
		for _, cond := range cn.Status.Conditions {
			if cond.Type == "ConnectorReady" && string(cond.Status) == status && cond.Reason == reason &&
				strings.Contains(cond.Message, msgPart) && cond.ObservedGeneration == cn.Generation && len(cn.Status.Devices) == devices {
				return nil
			}
		}
		return fmt.Errorf("status %+v", cn.Status)
	})
}

// A Connector's life: two replicas named from hostnamePrefix, Ready once
// both devices are up; a change of routes reaches the running replicas with
// no new key or device; a bad route is refused without touching them;
// scaling down deletes the removed replica's device and Secrets; deleting
// it leaves nothing behind.
func TestConnectorLifecycle(t *testing.T) {
	h := newHarness(t, nil)
	c := h.connector(`{"hostnamePrefix":"sr","replicas":2,"subnetRouter":{"advertiseRoutes":["10.42.0.0/16"]}}`)
	testpoll.Until(t, settle, "two replicas", func() error {
		for i := range 2 {
			cfg, err := c.config(i)
			if err != nil {
				return err
			}
			if cfg.Hostname != fmt.Sprintf("sr-%d", i) || cfg.Role != config.RoleConnector || !slices.Equal(cfg.Connector.Routes, []string{"10.42.0.0/16"}) {
				return fmt.Errorf("replica %d config %+v", i, cfg)
			}
		}
		return nil
	})
	s, err := h.kube.CoreV1().Secrets(h.opNS).Get(h.ctx(), c.replica(0).StateSecret, metav1.GetOptions{})
	if err != nil || s.Labels[proxystate.LabelParentNamespace] != "" || s.Labels[proxystate.LabelParentType] != "connector" {
		t.Fatalf("children carry the official labels (parent namespace \"\"): %v %v", s.Labels, err)
	}
	c.wantReady("False", "ConnectorCreating", "waiting for proxy pod", 0)
	c.login(0)
	second := c.login(1)
	c.wantReady("True", "ConnectorCreated", "ConnectorCreated", 2)
	c.reportRoutes(0, []string{"10.42.0.0/16"}, nil)
	h.wantEvent("default", c.name, "Warning", "RoutesNotApproved", "10.42.0.0/16 by sr-0. Approve them")
	c.reportRoutes(0, []string{"10.42.0.0/16"}, []string{"10.42.0.0/16"})
	if cn := c.get(); cn.Status.SubnetRoutes != "10.42.0.0/16" || cn.Status.Hostname != "sr-0.tail1.ts.net" || cn.Status.IsExitNode {
		t.Fatalf("status %+v", cn.Status)
	}
	keys := len(h.api.Keys())

	c.patch(`{"subnetRouter":{"advertiseRoutes":["10.42.0.0/16","10.43.0.0/16"]},"exitNode":true}`)
	testpoll.Until(t, settle, "new routes in both replicas", func() error {
		for i := range 2 {
			cfg, err := c.config(i)
			if err != nil {
				return err
			}
			if !slices.Equal(cfg.Connector.Routes, []string{"10.42.0.0/16", "10.43.0.0/16"}) || !cfg.Connector.ExitNode || cfg.AuthKey != "" {
				return fmt.Errorf("replica %d: %+v", i, cfg.Connector)
			}
		}
		return nil
	})
	c.wantReady("True", "ConnectorCreated", "", 2)
	if n := len(h.api.Keys()); n != keys {
		t.Fatalf("%d auth keys minted for a change of routes", n-keys)
	}

	c.patch(`{"subnetRouter":{"advertiseRoutes":["10.42.0.1/16"]}}`)
	c.wantReady("False", "ConnectorInvalid", "Connector is invalid: route 10.42.0.1/16 has non-address bits set; expected 10.42.0.0/16", 0)
	h.wantEvent("default", c.name, "Warning", "ConnectorInvalid", "non-address bits")
	if cfg, err := c.config(0); err != nil || len(cfg.Connector.Routes) != 2 {
		t.Fatalf("a refused spec changed the running replicas: %+v %v", cfg, err)
	}

	c.patch(`{"subnetRouter":{"advertiseRoutes":["10.42.0.0/16"]},"replicas":1}`)
	testpoll.Until(t, settle, "replica 1 removed", func() error {
		if !slices.Contains(h.api.Deleted(), second) {
			return fmt.Errorf("device %s not deleted: %v", second, h.api.Deleted())
		}
		for _, name := range []string{c.replica(1).ConfigSecret, c.replica(1).StateSecret} {
			if _, err := h.kube.CoreV1().Secrets(h.opNS).Get(h.ctx(), name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				return fmt.Errorf("Secret %s: %v", name, err)
			}
		}
		return nil
	})
	c.wantReady("True", "ConnectorCreated", "", 1)

	if err := h.dyn.Resource(resources.Connectors).Delete(h.ctx(), c.name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testpoll.Until(t, settle, "everything gone", func() error {
		if _, err := h.dyn.Resource(resources.Connectors).Get(h.ctx(), c.name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("Connector still there: %v", err)
		}
		if !slices.Contains(h.api.Deleted(), "nCN0") {
			return fmt.Errorf("device nCN0 not deleted: %v", h.api.Deleted())
		}
		list, err := h.kube.CoreV1().Secrets(h.opNS).List(h.ctx(), metav1.ListOptions{LabelSelector: proxystate.LabelParentType + "=connector"})
		if err != nil || len(list.Items) > 0 {
			return fmt.Errorf("Secrets left: %d %v", len(list.Items), err)
		}
		if _, err := h.kube.AppsV1().StatefulSets(h.opNS).Get(h.ctx(), c.replica(0).Base, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("StatefulSet left: %v", err)
		}
		return nil
	})
	if keys := h.api.ValidUnusedKeys(); len(keys) > 0 {
		t.Fatalf("unused keys left: %v", keys)
	}
}

// A Connector naming a ProxyClass that does not exist waits for it, says so
// in its condition and an Event, and gets no proxy meanwhile.
func TestConnectorWaitsForItsProxyClass(t *testing.T) {
	h := newHarness(t, nil)
	class := "late-" + h.ns
	c := h.connector(`{"exitNode":true,"proxyClass":"` + class + `"}`)
	c.wantReady("False", "ConnectorCreating", class, 0)
	h.wantEvent("default", c.name, "Warning", "ProxyPending", class)
	if _, err := c.config(0); !apierrors.IsNotFound(err) {
		t.Fatalf("a proxy was made before its ProxyClass exists: %v", err)
	}
	// The class appears and becomes Ready: the Connector goes on at once,
	// with nothing else touching it.
	h.createProxyClass(class, "registry.example.com/proxy:late")
	testpoll.Until(t, settle, "the Connector's proxy once its ProxyClass is Ready", func() error {
		_, err := c.config(0)
		return err
	})
}
