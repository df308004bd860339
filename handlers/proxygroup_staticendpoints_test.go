package handlers_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tailplane/tailplane/crds/tailscale/v1alpha1"
	"github.com/tailplane/tailplane/handlers/lib/proxyset"
	"github.com/tailplane/tailplane/handlers/lib/resources"
	"github.com/tailplane/tailplane/internal/testpoll"
)

// staticNode creates a Node (no kubelet: only its labels and addresses
// matter) with ExternalIP ip, labelled for this test's ProxyClass.
func (h *harness) staticNode(name, label, ip string) {
	h.t.Helper()
	nodes := h.kube.CoreV1().Nodes()
	n, err := nodes.Create(h.ctx(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"static-endpoints": label}}}, metav1.CreateOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() { _ = nodes.Delete(h.ctx(), name, metav1.DeleteOptions{}) })
	h.setExternalIP(n, ip)
}

func (h *harness) setExternalIP(n *corev1.Node, ip string) {
	h.t.Helper()
	n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.0.1"}, {Type: corev1.NodeExternalIP, Address: ip}}
	if _, err := h.kube.CoreV1().Nodes().UpdateStatus(h.ctx(), n, metav1.UpdateOptions{}); err != nil {
		h.t.Fatal(err)
	}
}

// nodePorts are the group's static endpoint Services: name -> "UDP
// <nodePort> -> <targetPort>".
func (g *groupFixture) nodePorts() (map[string]string, error) {
	list, err := g.kube.CoreV1().Services(g.opNS).List(g.ctx(), metav1.ListOptions{LabelSelector: "tailscale.com/parent-resource=" + g.name})
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, s := range list.Items {
		if !strings.HasSuffix(s.Name, "-nodeport") {
			continue
		}
		if s.Spec.Type != corev1.ServiceTypeNodePort || len(s.Spec.Ports) != 1 || s.Spec.Selector["statefulset.kubernetes.io/pod-name"] != strings.TrimSuffix(s.Name, "-nodeport") {
			return nil, fmt.Errorf("service %s: %+v", s.Name, s.Spec)
		}
		p := s.Spec.Ports[0]
		out[s.Name] = fmt.Sprintf("%s %d -> %s", p.Protocol, p.NodePort, p.TargetPort.String())
	}
	return out, nil
}

// wantEndpoints waits until each replica's config has listenPort and the
// endpoints given (one list per replica, in ordinal order).
func (g *groupFixture) wantEndpoints(listenPort *int, want ...[]string) {
	g.t.Helper()
	testpoll.Until(g.t, settle, fmt.Sprint("static endpoints ", want), func() error {
		for i, w := range want {
			cfg, err := g.config(i)
			if err != nil {
				return err
			}
			if !slices.Equal(cfg.StaticEndpoints, w) || (*listenPort != 0 && cfg.ListenPort != *listenPort) || (len(w) > 0) != (cfg.ListenPort != 0) {
				return fmt.Errorf("replica %d: listenPort %d, endpoints %v", i, cfg.ListenPort, cfg.StaticEndpoints)
			}
			*listenPort = cfg.ListenPort
		}
		return nil
	})
}

// wantListenPortAnnotation waits for the group's Pod template to name the
// replicas' WireGuard port (its change restarts them; "" for none).
func (g *groupFixture) wantListenPortAnnotation(want string) {
	g.t.Helper()
	testpoll.Until(g.t, settle, "listen port annotation "+want, func() error {
		sts, err := g.kube.AppsV1().StatefulSets(g.opNS).Get(g.ctx(), g.replica(0).Base, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if got := sts.Spec.Template.Annotations[proxyset.AnnotationListenPort]; got != want {
			return fmt.Errorf("annotation %q", got)
		}
		return nil
	})
}

func TestProxyGroupStaticEndpoints(t *testing.T) {
	h := newHarnessOpts(t, true, nil)
	label := h.ns
	h.staticNode("se-a-"+h.ns, label, "203.0.113.1")
	h.staticNode("se-b-"+h.ns, label, "203.0.113.2")
	h.staticNode("se-c-"+h.ns, "other", "203.0.113.3") // not selected
	class := "se-" + h.ns
	h.createClusterCR(resources.ProxyClasses, "ProxyClass", class,
		fmt.Sprintf(`{"staticEndpoints":{"nodePort":{"ports":[{"port":32710,"endPort":32711}],"selector":{"static-endpoints":%q}}}}`, label))
	testpoll.Until(t, settle, "ProxyClass ready", func() error {
		if s, msg := h.proxyClassReady(class); s != "True" {
			return fmt.Errorf("%s %s", s, msg)
		}
		return nil
	})
	g := h.proxyGroup(fmt.Sprintf(`{"type":"egress","replicas":2,"proxyClass":%q}`, class))

	// One NodePort Service per replica, to the group's one listenPort, and
	// each replica advertises its node port on the selected nodes.
	var listen int
	g.wantEndpoints(&listen, []string{"203.0.113.1:32710", "203.0.113.2:32710"}, []string{"203.0.113.1:32711", "203.0.113.2:32711"})
	testpoll.Until(t, settle, "NodePort Services", func() error {
		got, err := g.nodePorts()
		want := map[string]string{
			g.replica(0).Base + "-0-nodeport": fmt.Sprintf("UDP 32710 -> %d", listen),
			g.replica(0).Base + "-1-nodeport": fmt.Sprintf("UDP 32711 -> %d", listen),
		}
		if err != nil || fmt.Sprint(got) != fmt.Sprint(want) {
			return fmt.Errorf("got %v %v, want %v", got, err, want)
		}
		return nil
	})
	g.wantListenPortAnnotation(fmt.Sprint(listen))
	g.login(0)
	g.login(1)
	testpoll.Until(t, settle, "status.devices[].staticEndpoints", func() error {
		d := g.get().Status.Devices
		if len(d) != 2 || !slices.Equal(d[0].StaticEndpoints, []string{"203.0.113.1:32710", "203.0.113.2:32710"}) ||
			!slices.Equal(d[1].StaticEndpoints, []string{"203.0.113.1:32711", "203.0.113.2:32711"}) {
			return fmt.Errorf("devices %+v", d)
		}
		return nil
	})

	// A node's new ExternalIP replaces only its own endpoint.
	n, err := h.kube.CoreV1().Nodes().Get(h.ctx(), "se-a-"+h.ns, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	h.setExternalIP(n, "203.0.113.9")
	g.wantEndpoints(&listen, []string{"203.0.113.2:32710", "203.0.113.9:32710"}, []string{"203.0.113.2:32711", "203.0.113.9:32711"})

	// A third replica finds no free port: the group fails with the
	// official reason and message, until the class has more ports.
	g.patch(`{"replicas":3}`)
	g.wantCondition(v1alpha1.ProxyGroupReady, "False", v1alpha1.ReasonProxyGroupCreationFailed,
		fmt.Sprintf(`error provisioning NodePort Services for static endpoints: failed to allocate NodePorts to ProxyGroup Services: not enough available ports to allocate all replicas (needed 3, got 2). Field 'spec.staticEndpoints.nodePort.ports' on ProxyClass %q must have bigger range allocated`, class))
	h.wantEvent("", g.name, corev1.EventTypeWarning, v1alpha1.ReasonProxyGroupCreationFailed, "not enough available ports")
	h.patchSpec(resources.ProxyClasses, class, `{"staticEndpoints":{"nodePort":{"ports":[{"port":32710,"endPort":32712}]}}}`)
	g.wantEndpoints(&listen, []string{"203.0.113.2:32710", "203.0.113.9:32710"}, []string{"203.0.113.2:32711", "203.0.113.9:32711"},
		[]string{"203.0.113.9:32712", "203.0.113.2:32712"}) // a new replica's: in the order of the nodes' names

	// Nodes without an ExternalIP: the official message.
	h.patchSpec(resources.ProxyClasses, class, `{"staticEndpoints":{"nodePort":{"selector":{"static-endpoints":"none"}}}}`)
	g.wantCondition(v1alpha1.ProxyGroupReady, "False", v1alpha1.ReasonProxyGroupCreationFailed,
		fmt.Sprintf("error provisioning config Secrets: failed to match nodes to configured Selectors on `spec.staticEndpoints.nodePort.selectors` field for ProxyClass %q", class))
	h.patchSpec(resources.ProxyClasses, class, fmt.Sprintf(`{"staticEndpoints":{"nodePort":{"selector":{"static-endpoints":%q}}}}`, label))

	// Scaling down deletes the Services of the replicas gone.
	g.patch(`{"replicas":1}`)
	testpoll.Until(t, settle, "one NodePort Service", func() error {
		got, err := g.nodePorts()
		if err != nil || len(got) != 1 || got[g.replica(0).Base+"-0-nodeport"] != fmt.Sprintf("UDP 32710 -> %d", listen) {
			return fmt.Errorf("got %v %v", got, err)
		}
		return nil
	})

	// A class without static endpoints: no Services, no endpoints.
	h.patchSpec(resources.ProxyClasses, class, `{"staticEndpoints":null}`)
	none := 0
	g.wantEndpoints(&none, nil)
	g.wantListenPortAnnotation("")
	testpoll.Until(t, settle, "no NodePort Service", func() error {
		if got, err := g.nodePorts(); err != nil || len(got) != 0 {
			return fmt.Errorf("got %v %v", got, err)
		}
		return nil
	})

	// Back on, then the group deleted: nothing of it is left.
	h.patchSpec(resources.ProxyClasses, class, fmt.Sprintf(`{"staticEndpoints":{"nodePort":{"ports":[{"port":32710,"endPort":32712}],"selector":{"static-endpoints":%q}}}}`, label))
	testpoll.Until(t, settle, "NodePort Service back", func() error {
		if got, err := g.nodePorts(); err != nil || len(got) != 1 {
			return fmt.Errorf("got %v %v", got, err)
		}
		return nil
	})
	if err := h.dyn.Resource(resources.ProxyGroups).Delete(h.ctx(), g.name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testpoll.Until(t, settle, "group and Services gone", func() error {
		if _, err := h.dyn.Resource(resources.ProxyGroups).Get(h.ctx(), g.name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("group: %v", err)
		}
		if got, err := g.nodePorts(); err != nil || len(got) != 0 {
			return fmt.Errorf("got %v %v", got, err)
		}
		return nil
	})
}

func TestProxyClassStaticEndpointPorts(t *testing.T) {
	h := newHarnessOpts(t, true, nil)
	wantReady := func(class, status, msg string) {
		t.Helper()
		testpoll.Until(t, settle, "ProxyClassReady of "+class, func() error {
			if s, m := h.proxyClassReady(class); s != status || !strings.Contains(m, msg) {
				return fmt.Errorf("%s %s", s, m)
			}
			return nil
		})
	}
	outside, first, second := "se-out-"+h.ns, "se-1-"+h.ns, "se-2-"+h.ns
	// The cluster's range, learned from the API server (30000-32767 here).
	h.createClusterCR(resources.ProxyClasses, "ProxyClass", outside, `{"staticEndpoints":{"nodePort":{"ports":[{"port":32760,"endPort":32768}]}}}`)
	wantReady(outside, "False", `ProxyClass is not valid: spec.staticEndpoints.nodePort.ports: Invalid value: "32760-32768": range "32760-32768" is not within Cluster configured range "30000-32767"`)

	// Two classes may not share a node port; when the first goes, the
	// second is valid.
	h.createClusterCR(resources.ProxyClasses, "ProxyClass", first, `{"staticEndpoints":{"nodePort":{"ports":[{"port":32720,"endPort":32725}]}}}`)
	wantReady(first, "True", "")
	h.createClusterCR(resources.ProxyClasses, "ProxyClass", second, `{"staticEndpoints":{"nodePort":{"ports":[{"port":32725,"endPort":32729}]}}}`)
	wantReady(second, "False", fmt.Sprintf("port ranges for ProxyClass %q clash with existing ProxyClass %q", second, first))
	h.wantEvent("", second, corev1.EventTypeWarning, v1alpha1.ReasonProxyClassInvalid, "clash with existing ProxyClass")
	if err := h.dyn.Resource(resources.ProxyClasses).Delete(h.ctx(), first, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	wantReady(second, "True", "")
	if _, err := h.kube.CoreV1().Services(h.opNS).Get(h.ctx(), "tailplane-nodeport-range-probe", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the probe Service exists: %v", err)
	}
}
