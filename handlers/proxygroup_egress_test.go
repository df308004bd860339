package handlers_test

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/tailplane/tailplane/handlers/egress"
	"github.com/tailplane/tailplane/handlers/lib/groupmember"
	"github.com/tailplane/tailplane/handlers/lib/proxyset"
	"github.com/tailplane/tailplane/handlers/lib/resources"
	"github.com/tailplane/tailplane/internal/proxystate"
	"github.com/tailplane/tailplane/internal/testpoll"
	"github.com/tailplane/tailplane/proxy/config"
)

func egressService(name, group, fqdn string, port int32) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{
			"tailscale.com/proxy-group": group, "tailscale.com/tailnet-fqdn": fqdn}},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "placeholder",
			Ports: []corev1.ServicePort{{Name: "db", Port: port, Protocol: corev1.ProtocolTCP}}},
	}
}

// pod stands in for replica i's Pod (no kubelet here): its readiness and IP
// are what the EndpointSlices follow.
func (g *groupFixture) pod(i int, ip string, ready bool) {
	g.t.Helper()
	name := g.replica(i).StateSecret
	pods := g.kube.CoreV1().Pods(g.opNS)
	p, err := pods.Get(g.ctx(), name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		p, err = pods.Create(g.ctx(), &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: proxyset.Parent{Type: groupmember.ParentType, Name: g.name}.OfficialLabels()},
			Spec: corev1.PodSpec{ServiceAccountName: g.replica(i).Base, AutomountServiceAccountToken: new(false),
				Containers: []corev1.Container{{Name: "tailscale", Image: "x"}}},
		}, metav1.CreateOptions{})
		g.t.Cleanup(func() { _ = pods.Delete(g.ctx(), name, metav1.DeleteOptions{}) })
	}
	if err != nil {
		g.t.Fatal(err)
	}
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	p.Status.PodIP, p.Status.PodIPs = ip, []corev1.PodIP{{IP: ip}}
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: status}}
	if _, err := pods.UpdateStatus(g.ctx(), p, metav1.UpdateOptions{}); err != nil {
		g.t.Fatal(err)
	}
	// The Pod's process started (pod_uid) and applied its config.
	g.writeState(i, map[string][]byte{proxystate.KeyPodUID: []byte(p.UID), proxystate.KeyConfigApplied: []byte(p.UID)})
}

func (g *groupFixture) egressTargets(i int) ([]config.EgressTarget, error) {
	cfg, err := g.config(i)
	if err != nil {
		return nil, err
	}
	if cfg.Role != config.RoleEgress || cfg.Egress == nil {
		return nil, fmt.Errorf("config of role %q", cfg.Role)
	}
	return cfg.Egress.Targets, nil
}

// An egress ProxyGroup: each ExternalName Service naming it gets a cluster
// Service with ports of its own in the group, an EndpointSlice of the ready
// replicas that serve it, its externalName pointed there and the official
// conditions; every replica gets its target; removing it removes all that.
// With the operator's own RBAC.
func TestProxyGroupEgress(t *testing.T) {
	h := newHarnessOpts(t, true, nil)
	g := h.proxyGroup(`{"type":"egress"}`)
	testpoll.Until(t, settle, "replicas without targets", func() error {
		for i := range 2 {
			if ts, err := g.egressTargets(i); err != nil || len(ts) != 0 {
				return fmt.Errorf("replica %d: %v %v", i, ts, err)
			}
		}
		return nil
	})
	g.login(0)
	g.login(1)
	g.pod(0, "10.1.0.10", true)
	g.pod(1, "10.1.0.11", true)

	h.createService(egressService("db", g.name, "db.tail1.ts.net", 5432))
	h.createService(egressService("api", g.name, "api.tail1.ts.net", 5432))
	dbCS, apiCS := groupmember.ClusterServiceName(h.ns, "db"), groupmember.ClusterServiceName(h.ns, "api")
	var listen []int
	testpoll.Until(t, settle, "both targets on both replicas", func() error {
		listen = nil
		for i := range 2 {
			ts, err := g.egressTargets(i)
			if err != nil || len(ts) != 2 {
				return fmt.Errorf("replica %d: %+v %v", i, ts, err)
			}
			for _, tg := range ts {
				if tg.Ports[0].TargetPort != 5432 {
					return fmt.Errorf("target %+v", tg)
				}
				if i == 0 {
					listen = append(listen, tg.Ports[0].Port)
				}
			}
		}
		return nil
	})
	slices.Sort(listen)
	if listen[0] < 10000 || listen[0] == listen[1] {
		t.Fatalf("listen ports %v: want two distinct ports of the egress range", listen)
	}
	testpoll.Until(t, settle, "db points at its cluster Service", func() error {
		if got, want := h.service("db").Spec.ExternalName, dbCS+"."+h.opNS+".svc.cluster.local"; got != want {
			return fmt.Errorf("externalName %q, want %q", got, want)
		}
		return nil
	})
	slice := func(cs string) (*discoveryv1.EndpointSlice, error) {
		return h.kube.DiscoveryV1().EndpointSlices(h.opNS).Get(h.ctx(), cs+"-ipv4", metav1.GetOptions{})
	}
	endpoints := func(cs string, want ...string) {
		t.Helper()
		testpoll.Until(t, settle, cs+" endpoints "+strings.Join(want, ","), func() error {
			s, err := slice(cs)
			if err != nil {
				return err
			}
			var got []string
			for _, e := range s.Endpoints {
				got = append(got, e.Addresses...)
			}
			slices.Sort(got)
			if !slices.Equal(got, want) || s.Labels[discoveryv1.LabelServiceName] != cs {
				return fmt.Errorf("endpoints %v", got)
			}
			return nil
		})
	}
	endpoints(dbCS, "10.1.0.10", "10.1.0.11")
	egressCond := func(name, typ, status, reason, msgPart string) {
		t.Helper()
		testpoll.Until(t, settle, typ+" of "+name, func() error {
			c := meta.FindStatusCondition(h.service(name).Status.Conditions, typ)
			if c == nil || string(c.Status) != status || !strings.HasPrefix(c.Reason, reason) || !strings.Contains(c.Message, msgPart) {
				return fmt.Errorf("conditions %+v", h.service(name).Status.Conditions)
			}
			return nil
		})
	}
	egressCond("db", egress.ConditionEgressValid, "True", egress.ReasonEgressValid, "")
	egressCond("db", egress.ConditionEgressConfigured, "True", "ConfiguredFor:ProxyGroup:"+g.name+":Config:", "")
	egressCond("db", egress.ConditionEgressReady, "True", egress.ReasonReady, "2/2")

	// A replica that is not ready leaves the EndpointSlices.
	g.pod(1, "10.1.0.11", false)
	endpoints(dbCS, "10.1.0.10")
	endpoints(apiCS, "10.1.0.10")
	egressCond("db", egress.ConditionEgressReady, "True", egress.ReasonPartiallyReady, "1/2")

	// A replica restarted (its process has not applied its config yet)
	// is not listed either.
	g.writeState(0, map[string][]byte{proxystate.KeyConfigApplied: []byte("uid-of-the-previous-pod")})
	endpoints(dbCS)
	egressCond("db", egress.ConditionEgressReady, "False", egress.ReasonNotReady, "0/2")
	g.pod(0, "10.1.0.10", true)
	endpoints(dbCS, "10.1.0.10")

	// An operator restart changes nothing: no new key, the same ports,
	// EndpointSlices and conditions.
	keys := len(h.api.Keys())
	h.restart()
	egressCond("db", egress.ConditionEgressReady, "True", egress.ReasonPartiallyReady, "1/2")
	endpoints(dbCS, "10.1.0.10")
	endpoints(apiCS, "10.1.0.10")
	targets, err := g.egressTargets(0)
	if err != nil {
		t.Fatal(err)
	}
	var after []int
	for _, tg := range targets {
		after = append(after, tg.Ports[0].Port)
	}
	slices.Sort(after)
	if !slices.Equal(after, listen) || len(h.api.Keys()) != keys {
		t.Fatalf("restart changed the group: ports %v (were %v), %d keys (were %d)", after, listen, len(h.api.Keys()), keys)
	}

	// Bad input: a group of another type, a group that does not exist.
	h.createService(egressService("wrong", "missing-"+h.ns, "x.tail1.ts.net", 80))
	egressCond("wrong", egress.ConditionEgressValid, "Unknown", egress.ReasonProxyGroupNotReady, "does not exist")
	ig := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "tailscale.com/v1alpha1", "kind": "ProxyGroup",
		"metadata": map[string]any{"name": "ig-" + h.ns}, "spec": map[string]any{"type": "ingress", "replicas": int64(0)}}}
	if _, err := h.dyn.Resource(resources.ProxyGroups).Create(h.ctx(), ig, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.dyn.Resource(resources.ProxyGroups).Delete(h.ctx(), "ig-"+h.ns, metav1.DeleteOptions{}) })
	h.createService(egressService("toingress", "ig-"+h.ns, "x.tail1.ts.net", 80))
	egressCond("toingress", egress.ConditionEgressValid, "False", egress.ReasonEgressInvalid, `is of type "ingress"`)
	h.wantEvent(h.ns, "toingress", corev1.EventTypeWarning, egress.ReasonInvalidService, `egress Services need a ProxyGroup of type egress`)

	// Deleting a member removes its objects and its target.
	if err := h.kube.CoreV1().Services(h.ns).Delete(h.ctx(), "db", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testpoll.Until(t, settle, "db's objects gone", func() error {
		if _, err := h.kube.CoreV1().Services(h.opNS).Get(h.ctx(), dbCS, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("cluster Service: %v", err)
		}
		if _, err := slice(dbCS); !apierrors.IsNotFound(err) {
			return fmt.Errorf("EndpointSlice: %v", err)
		}
		if ts, err := g.egressTargets(0); err != nil || len(ts) != 1 || ts[0].FQDN != "api.tail1.ts.net." {
			return fmt.Errorf("targets %+v %v", ts, err)
		}
		return nil
	})
}

// Egress Services created at once on one group get distinct listen ports:
// the group allocates them, one group at a time, from its cluster Services.
func TestProxyGroupEgressPortsOfMembersCreatedAtOnce(t *testing.T) {
	h := newHarness(t, nil)
	g := h.proxyGroup(`{"type":"egress","replicas":1}`)
	const members = 8
	var wg sync.WaitGroup
	errs := make(chan error, members)
	for i := range members {
		svc := egressService(fmt.Sprintf("m%d", i), g.name, fmt.Sprintf("m%d.tail1.ts.net", i), 5432)
		svc.Namespace = h.ns
		svc.Spec.Ports = append(svc.Spec.Ports, corev1.ServicePort{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP})
		wg.Go(func() {
			_, err := h.kube.CoreV1().Services(h.ns).Create(h.ctx(), svc, metav1.CreateOptions{})
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	testpoll.Until(t, settle, "distinct ports for every member, on the replica too", func() error {
		seen := map[int32]string{}
		for i := range members {
			name := groupmember.ClusterServiceName(h.ns, fmt.Sprintf("m%d", i))
			cs, err := h.kube.CoreV1().Services(h.opNS).Get(h.ctx(), name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if len(cs.Spec.Ports) != 2 {
				return fmt.Errorf("%s ports %+v", name, cs.Spec.Ports)
			}
			for _, p := range cs.Spec.Ports {
				port := p.TargetPort.IntVal
				if other, dup := seen[port]; dup || port < 10000 || port >= 11000 {
					return fmt.Errorf("port %d of %s (also %q)", port, name, other)
				}
				seen[port] = name
			}
			if got := h.service(fmt.Sprintf("m%d", i)).Spec.ExternalName; !strings.HasPrefix(got, name+".") {
				return fmt.Errorf("m%d externalName %q", i, got)
			}
		}
		ts, err := g.egressTargets(0)
		if err != nil || len(ts) != members {
			return fmt.Errorf("replica targets %+v %v", ts, err)
		}
		return nil
	})
}
