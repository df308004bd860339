package proxygroup

import (
	"context"
	"fmt"
	"slices"
	"sort"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/tailplane/tailplane/crds/tailscale/v1alpha1"
	"github.com/tailplane/tailplane/handlers/lib/cluster"
	"github.com/tailplane/tailplane/handlers/lib/groupmember"
	"github.com/tailplane/tailplane/handlers/lib/resources"
	"github.com/tailplane/tailplane/internal/proxystate"
	"github.com/tailplane/tailplane/proxy/config"
	"github.com/tailplane/tailplane/runtime"
)

// registerEgress adds the egress groups' port allocation and a watch of the
// groups' Pods (a replica's readiness, address or shutdown changes the
// group's status and the egress members' EndpointSlices). Registered before
// the group's pipeline module, so that a cycle of the group allocates
// before it renders the replicas' configs from the cluster Services.
func registerEgress(op *runtime.Operator, g *groups) {
	op.On(resources.ProxyGroups, "proxygroup-egress-ports", func(ctx context.Context, ev *runtime.Event) (any, error) {
		return nil, cluster.Retry(g.allocatePorts(ctx, ev.Object.GetName()), ev.Retry)
	}, runtime.When(ofType(v1alpha1.ProxyGroupTypeEgress)), g.d.StateStore(), runtime.Causes(runtime.CauseCreate, runtime.CauseUpdate, runtime.CauseResume, runtime.CauseEnqueue))
	sel := labels.SelectorFromSet(labels.Set{proxystate.LabelManaged: "true", proxystate.LabelParentType: groupmember.ParentType}).String()
	op.Watch(resources.Pods, "proxygroup-pods", func(_ watch.EventType, old, obj *unstructured.Unstructured) []runtime.Key {
		if old != nil && podReady(old) == podReady(obj) && podIP(old) == podIP(obj) &&
			(old.GetDeletionTimestamp() == nil) == (obj.GetDeletionTimestamp() == nil) {
			return nil
		}
		return []runtime.Key{{Resource: resources.ProxyGroups, Name: obj.GetLabels()[proxystate.LabelParentName]}}
	}, runtime.Namespace(g.d.Settings.Namespace), runtime.Selector(sel))
}

func podReady(obj *unstructured.Unstructured) bool {
	conds, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok && m["type"] == "Ready" {
			return m["status"] == "True"
		}
	}
	return false
}

func podIP(obj *unstructured.Unstructured) string {
	ip, _, _ := unstructured.NestedString(obj.Object, "status", "podIP")
	return ip
}

// egressTargets are the targets of the group's members, from their cluster
// Services (where their ports were allocated), sorted by Service name.
func (g *groups) egressTargets(ctx context.Context, group string) ([]config.EgressTarget, error) {
	list, err := groupmember.ClusterServices(ctx, g.d.Kube, g.d.Settings.Namespace, group)
	if err != nil {
		return nil, err
	}
	// A port two cluster Services claim (left by an earlier operator that
	// died between two steps) is served for the first; the other member's
	// handler moves it.
	var out []config.EgressTarget
	used := map[string]bool{}
	for i := range list {
		t, ok := groupmember.TargetOf(&list[i])
		if !ok || slices.ContainsFunc(t.Ports, func(p config.PortMap) bool { return used[portID(p)] }) {
			continue
		}
		for _, p := range t.Ports {
			used[portID(p)] = true
		}
		out = append(out, t)
	}
	return out, nil
}

func portID(p config.PortMap) string { return string(p.EffectiveProtocol()) + "/" + fmt.Sprint(p.Port) }

// allocatePorts gives every admitted egress member of group (what the
// member kinds claim) its cluster Service, whose target ports are the
// allocation: kept while no other member holds them, otherwise the lowest
// free ones. It runs as a handler of the group, and the runtime never
// handles one group twice at once, so two members never take one port;
// the cluster Services themselves are the record, read from the API
// server. Members whose cluster Service changed are handled again.
func (g *groups) allocatePorts(ctx context.Context, group string) error {
	existing, err := groupmember.ClusterServices(ctx, g.d.Kube, g.d.Settings.Namespace, group)
	if err != nil {
		return err
	}
	byName := map[string]*corev1.Service{}
	for i := range existing {
		byName[existing[i].Name] = &existing[i]
	}
	claims, err := g.members.EgressClaims(ctx, group)
	if err != nil {
		return err
	}
	// Members in the order of their cluster Services' names, the order in
	// which egressTargets serves a port two of them claim: the first keeps
	// it, and a member never takes a port a later one holds.
	sort.Slice(claims, func(i, j int) bool {
		return groupmember.ClusterServiceName(claims[i].Namespace, claims[i].Name) < groupmember.ClusterServiceName(claims[j].Namespace, claims[j].Name)
	})
	held := map[int32]string{} // port -> cluster Service
	for _, cs := range existing {
		for _, p := range cs.Spec.Ports {
			if _, ok := held[p.TargetPort.IntVal]; !ok {
				held[p.TargetPort.IntVal] = cs.Name
			}
		}
	}
	for _, c := range claims {
		name := groupmember.ClusterServiceName(c.Namespace, c.Name)
		taken := map[int32]bool{}
		for port, holder := range held {
			if holder != name {
				taken[port] = true
			}
		}
		cs, err := groupmember.ClusterService(c.Egress, g.d.Settings.Namespace, byName[name], taken)
		if err != nil { // no free port left: the member shows why
			if err := c.Refuse(ctx, err.Error()); err != nil {
				return err
			}
			continue
		}
		for port, holder := range held {
			if holder == name {
				delete(held, port)
			}
		}
		for _, p := range cs.Spec.Ports {
			held[p.TargetPort.IntVal] = name
		}
		if old := byName[name]; old != nil && groupmember.UpToDate(old, cs) {
			continue
		}
		if err := g.d.Apply(ctx, cs); err != nil {
			return err
		}
		g.d.Op.Enqueue(c.Key.Resource, c.Key.Namespace+"/"+c.Key.Name, 0)
		// The replicas' configs follow the cluster Services.
		g.d.Op.Enqueue(resources.ProxyGroups, group, 0)
	}
	return nil
}
