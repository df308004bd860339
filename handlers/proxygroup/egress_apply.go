package proxygroup

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/tailplane/tailplane/crds/tailscale/v1alpha1"
	"github.com/tailplane/tailplane/handlers/egress"
	"github.com/tailplane/tailplane/handlers/lib/cluster"
	"github.com/tailplane/tailplane/handlers/lib/conditions"
	"github.com/tailplane/tailplane/handlers/lib/pipeline"
	"github.com/tailplane/tailplane/handlers/lib/resources"
	"github.com/tailplane/tailplane/internal/proxystate"
	"github.com/tailplane/tailplane/proxy/config"
	"github.com/tailplane/tailplane/runtime"
)

// isEgressMember: a Service naming a ProxyGroup and a tailnet target.
func isEgressMember(obj *unstructured.Unstructured) bool {
	a := obj.GetAnnotations()
	return a[AnnotationProxyGroup] != "" && (a[egress.AnnotationTailnetFQDN] != "" || a[egress.AnnotationTailnetIP] != "" ||
		a[egress.AnnotationTailnetIPDeprecated] != "")
}

// registerEgress adds the egress groups' port allocation and a watch of the
// groups' Pods (a replica's readiness, address or shutdown changes the
// group's status and the egress members' EndpointSlices). Registered before
// the group's pipeline module, so that a cycle of the group allocates
// before it renders the replicas' configs from the cluster Services.
func registerEgress(op *runtime.Operator, g *groups) {
	isEgressGroup := func(obj *unstructured.Unstructured) bool {
		t, _, _ := unstructured.NestedString(obj.Object, "spec", "type")
		return t == string(v1alpha1.ProxyGroupTypeEgress)
	}
	op.On(resources.ProxyGroups, "proxygroup-egress-ports", func(ctx context.Context, ev *runtime.Event) (any, error) {
		return nil, cluster.Retry(g.allocatePorts(ctx, ev.Object.GetName()), ev.Retry)
	}, runtime.When(isEgressGroup), g.d.StateStore(), runtime.Causes(runtime.CauseCreate, runtime.CauseUpdate, runtime.CauseResume, runtime.CauseEnqueue))
	sel := labels.SelectorFromSet(labels.Set{proxystate.LabelManaged: "true", proxystate.LabelParentType: ParentType}).String()
	op.Watch(resources.Pods, "proxygroup-pods", func(_ watch.EventType, old, obj *unstructured.Unstructured) []runtime.Key {
		if old != nil && podReady(old) == podReady(obj) && podIP(old) == podIP(obj) &&
			(old.GetDeletionTimestamp() == nil) == (obj.GetDeletionTimestamp() == nil) {
			return nil
		}
		return []runtime.Key{{Resource: resources.ProxyGroups, Name: obj.GetLabels()[proxystate.LabelParentName]}}
	}, runtime.Namespace(g.d.Settings.Namespace), runtime.Selector(sel))
}

// egressModule is egress Services as members: each gets a cluster Service
// in the operator namespace (its ports allocated by the group,
// allocatePorts), an EndpointSlice of the replicas serving it, and its
// externalName pointed there.
func (g *groups) egressModule() pipeline.MemberModule[*EgressMember] {
	return pipeline.MemberModule[*EgressMember]{
		ID: "proxygroup-egress", Resource: resources.Services, Kind: "Service", Finalizer: finalizerEgress,
		Index: indexEgressMembers, GroupResource: resources.ProxyGroups, IsOurs: isEgressMember, Group: groupOf,
		Admit: g.admitEgress, Serve: g.serveEgress, Release: g.releaseEgress,
		Clear: func(ctx context.Context, obj *unstructured.Unstructured) error {
			svc, err := cluster.DecodeService(obj)
			if err != nil {
				return runtime.Permanent(err)
			}
			conds := svc.Status.Conditions
			for _, t := range []string{ConditionEgressValid, ConditionEgressConfigured, ConditionEgressReady} {
				conds = conditions.Remove(conds, t)
			}
			if equalConditions(conds, svc.Status.Conditions) {
				return nil
			}
			return g.d.PatchStatus(ctx, resources.Services, svc.Namespace, svc.Name, map[string]any{"conditions": orNil(len(conds) == 0, conds)})
		},
	}
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
	list, err := g.clusterServices(ctx, group)
	if err != nil {
		return nil, err
	}
	// A port two cluster Services claim (left by an earlier operator that
	// died between two steps) is served for the first; the other member's
	// handler moves it.
	var out []config.EgressTarget
	used := map[string]bool{}
	for i := range list {
		t, ok := targetOf(&list[i])
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

func (g *groups) clusterServices(ctx context.Context, group string) ([]corev1.Service, error) {
	sel := labels.SelectorFromSet(labels.Set{labelProxyGroup: group, labelSvcType: svcTypeEgress}).String()
	list, err := g.d.Kube.CoreV1().Services(g.d.Settings.Namespace).List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return nil, fmt.Errorf("list egress Services of ProxyGroup %s: %w", group, err)
	}
	sort.Slice(list.Items, func(i, j int) bool { return list.Items[i].Name < list.Items[j].Name })
	return list.Items, nil
}

// admitEgress reads an egress member and checks its group.
func (g *groups) admitEgress(ctx context.Context, obj *unstructured.Unstructured) (*EgressMember, bool, error) {
	svc, err := cluster.DecodeService(obj)
	if err != nil {
		return nil, false, runtime.Permanent(err)
	}
	m, err := EgressMemberOf(svc, g.d.Settings)
	if err != nil {
		g.d.Post(svc, corev1.EventTypeWarning, ReasonInvalidService, err.Error())
		return nil, false, g.egressStatus(ctx, svc, metav1.ConditionFalse, ReasonEgressInvalid, err.Error(), nil)
	}
	pg, err := g.group(ctx, m.Group)
	if err != nil {
		return nil, false, err
	}
	switch {
	case pg == nil:
		msg := fmt.Sprintf("ProxyGroup %q does not exist", m.Group)
		g.d.Post(svc, corev1.EventTypeWarning, ReasonProxyGroupNotFound, msg)
		return nil, false, g.egressStatus(ctx, svc, metav1.ConditionUnknown, ReasonProxyGroupNotReady, msg, nil)
	case pg.Spec.Type != v1alpha1.ProxyGroupTypeEgress:
		msg := fmt.Sprintf("ProxyGroup %q is of type %q; egress Services need a ProxyGroup of type egress", m.Group, pg.Spec.Type)
		g.d.Post(svc, corev1.EventTypeWarning, ReasonInvalidService, msg)
		return nil, false, g.egressStatus(ctx, svc, metav1.ConditionFalse, ReasonEgressInvalid, msg, nil)
	}
	m.pg = pg
	return m, true, nil
}

// allocatePorts gives every admitted egress member of group (it carries
// finalizerEgress) its cluster Service, whose target ports are the
// allocation: kept while no other member holds them, otherwise the lowest
// free ones. It runs as a handler of the group, and the runtime never
// handles one group twice at once, so two members never take one port;
// the cluster Services themselves are the record, read from the API
// server. Members whose cluster Service changed are handled again.
func (g *groups) allocatePorts(ctx context.Context, group string) error {
	existing, err := g.clusterServices(ctx, group)
	if err != nil {
		return err
	}
	byName := map[string]*corev1.Service{}
	for i := range existing {
		byName[existing[i].Name] = &existing[i]
	}
	type admittedMember struct {
		m   *EgressMember
		svc *corev1.Service
	}
	var members []admittedMember
	for _, k := range g.egresses.Keys(group) {
		svc, err := g.d.Kube.CoreV1().Services(k.Namespace).Get(ctx, k.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return fmt.Errorf("read Service %s/%s of ProxyGroup %s: %w", k.Namespace, k.Name, group, err)
		}
		if svc.DeletionTimestamp != nil || !slices.Contains(svc.Finalizers, finalizerEgress) || svc.Annotations[AnnotationProxyGroup] != group {
			continue // not admitted (yet), or leaving
		}
		m, err := EgressMemberOf(svc, g.d.Settings)
		if err != nil {
			continue // its own handler says why
		}
		members = append(members, admittedMember{m, svc})
	}
	// Members in the order of their cluster Services' names, the order in
	// which egressTargets serves a port two of them claim: the first keeps
	// it, and a member never takes a port a later one holds.
	sort.Slice(members, func(i, j int) bool {
		return ClusterServiceName(members[i].m.Namespace, members[i].m.Name) < ClusterServiceName(members[j].m.Namespace, members[j].m.Name)
	})
	held := map[int32]string{} // port -> cluster Service
	for _, cs := range existing {
		for _, p := range cs.Spec.Ports {
			if _, ok := held[p.TargetPort.IntVal]; !ok {
				held[p.TargetPort.IntVal] = cs.Name
			}
		}
	}
	for _, a := range members {
		m := a.m
		name := ClusterServiceName(m.Namespace, m.Name)
		taken := map[int32]bool{}
		for port, holder := range held {
			if holder != name {
				taken[port] = true
			}
		}
		cs, err := ClusterService(m, g.d.Settings.Namespace, byName[name], taken)
		if err != nil { // no free port left: the member shows why
			if err := g.egressStatus(ctx, a.svc, metav1.ConditionFalse, ReasonEgressInvalid, err.Error(), nil); err != nil {
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
		if old := byName[name]; old != nil && upToDate(old, cs) {
			continue
		}
		if err := g.d.Apply(ctx, cs); err != nil {
			return err
		}
		g.d.Op.Enqueue(resources.Services, m.Namespace+"/"+m.Name, 0)
		// The replicas' configs follow the cluster Services.
		g.d.Op.Enqueue(resources.ProxyGroups, group, 0)
	}
	return nil
}

// upToDate reports whether the cluster Service cur already is want.
func upToDate(cur, want *corev1.Service) bool {
	return slices.Equal(cur.Spec.Ports, want.Spec.Ports) && mapsEqual(cur.Annotations, want.Annotations) &&
		cur.Labels[labelProxyGroup] == want.Labels[labelProxyGroup]
}

// serveEgress gives an egress member an EndpointSlice of the replicas
// serving its cluster Service, and points the member's externalName at it;
// the group's replicas get its target. Until the group allocated the
// member's ports (its cluster Service is missing or behind the member) it
// waits: the member's change had its group handled (the member watch), and
// the group hands the member back once it did. It does not enqueue the
// group itself, so that a group out of ports does not spin.
func (g *groups) serveEgress(ctx context.Context, obj *unstructured.Unstructured, m *EgressMember) error {
	svc, err := cluster.DecodeService(obj)
	if err != nil {
		return runtime.Permanent(err)
	}
	pg := m.pg
	cs, err := g.d.Kube.CoreV1().Services(g.d.Settings.Namespace).Get(ctx, ClusterServiceName(m.Namespace, m.Name), metav1.GetOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("read egress Service of %s/%s: %w", m.Namespace, m.Name, err)
	}
	if err != nil {
		cs = nil
	}
	// With nothing taken, ClusterService keeps every port cs has: it
	// differs only where the member has ports, a target or a group cs
	// lacks.
	if want, werr := ClusterService(m, g.d.Settings.Namespace, cs, nil); cs == nil || werr != nil || !upToDate(cs, want) {
		return nil
	}
	serving, total, err := g.servingReplicas(ctx, pg, cs)
	if err != nil {
		return err
	}
	for _, family := range []discoveryv1.AddressType{discoveryv1.AddressTypeIPv4, discoveryv1.AddressTypeIPv6} {
		var ips []string
		for _, ip := range serving {
			if strings.Contains(ip, ":") == (family == discoveryv1.AddressTypeIPv6) {
				ips = append(ips, ip)
			}
		}
		if err := g.d.Apply(ctx, endpointSlice(cs, family, ips)); err != nil {
			return err
		}
	}
	if want := externalNameOf(cs, g.d.ClusterDomain); svc.Spec.ExternalName != want {
		patch, _ := json.Marshal(map[string]any{"spec": map[string]any{"externalName": want}})
		if _, err := g.d.Kube.CoreV1().Services(svc.Namespace).Patch(ctx, svc.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			return fmt.Errorf("point Service %s/%s at its ProxyGroup: %w", svc.Namespace, svc.Name, err)
		}
	}
	return g.egressStatus(ctx, svc, metav1.ConditionTrue, ReasonEgressValid, ReasonEgressValid, &readiness{pg: pg.Name, serving: len(serving), total: total, hash: configHash(cs)})
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// servingReplicas are the pod IPs of the group's replicas that serve cs's
// target: their Pod is Ready, their device is up, the Pod's own process
// applied its config (config_applied), and that config has the target. total is the number of replicas.
func (g *groups) servingReplicas(ctx context.Context, pg *v1alpha1.ProxyGroup, cs *corev1.Service) ([]string, int, error) {
	want, _ := targetOf(cs)
	total := replicaCount(pg)
	replicas, err := g.replicaPods(ctx, pg)
	if err != nil {
		return nil, total, err
	}
	var out []string
	for _, r := range replicas {
		if r.Pod == nil || r.Device.ID == "" || r.State == nil || len(r.State.Data[proxystate.KeyConfigError]) > 0 || !hasTarget(r.Config, want) {
			continue
		}
		// The running process must have applied the config: a Pod just
		// restarted can be Ready before its proxy listens.
		if string(r.State.Data[proxystate.KeyConfigApplied]) != string(r.Pod.UID) || !podIsReady(r.Pod) {
			continue
		}
		for _, ip := range r.Pod.Status.PodIPs {
			out = append(out, ip.IP)
		}
	}
	return out, total, nil
}

func hasTarget(cfgSecret *corev1.Secret, want config.EgressTarget) bool {
	if cfgSecret == nil {
		return false
	}
	var c config.Config
	if json.Unmarshal(cfgSecret.Data[config.SecretKey], &c) != nil || c.Egress == nil {
		return false
	}
	return slices.ContainsFunc(c.Egress.Targets, func(t config.EgressTarget) bool {
		return t.FQDN == want.FQDN && t.IP == want.IP && slices.Equal(t.Ports, want.Ports)
	})
}

func configHash(cs *corev1.Service) string {
	b, _ := json.Marshal([]any{cs.Spec.Ports, cs.Annotations, cs.Labels[labelProxyGroup]})
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])[:16]
}

// readiness is what TailscaleEgressSvcConfigured and TailscaleEgressSvcReady
// are written from.
type readiness struct {
	pg             string
	serving, total int
	hash           string
}

// egressStatus writes TailscaleEgressSvcValid and, once configured, the
// other two conditions (removed otherwise).
func (g *groups) egressStatus(ctx context.Context, svc *corev1.Service, valid metav1.ConditionStatus, reason, msg string, r *readiness) error {
	conds := conditions.Set(svc.Status.Conditions, metav1.Condition{Type: ConditionEgressValid, Status: valid, Reason: reason, Message: msg})
	if r == nil {
		conds = conditions.Remove(conditions.Remove(conds, ConditionEgressConfigured), ConditionEgressReady)
	} else {
		conds = conditions.Set(conds, metav1.Condition{Type: ConditionEgressConfigured, Status: metav1.ConditionTrue,
			Reason: "ConfiguredFor:ProxyGroup:" + r.pg + ":Config:" + r.hash, Message: "the ProxyGroup's replicas are configured for this Service"})
		ready := metav1.Condition{Type: ConditionEgressReady, Status: metav1.ConditionTrue,
			Message: fmt.Sprintf("%d/%d ProxyGroup replicas route traffic for this Service", r.serving, r.total)}
		switch {
		case r.total == 0:
			ready.Status, ready.Reason = metav1.ConditionFalse, reasonNoProxies
		case r.serving == 0:
			ready.Status, ready.Reason = metav1.ConditionFalse, ReasonNotReady
		case r.serving < r.total:
			ready.Reason = ReasonPartiallyReady
		default:
			ready.Reason = ReasonReady
		}
		conds = conditions.Set(conds, ready)
	}
	if equalConditions(conds, svc.Status.Conditions) {
		return nil
	}
	return g.d.PatchStatus(ctx, resources.Services, svc.Namespace, svc.Name, map[string]any{"conditions": orNil(len(conds) == 0, conds)})
}

func equalConditions(a, b []metav1.Condition) bool {
	return slices.EqualFunc(a, b, func(x, y metav1.Condition) bool {
		return x.Type == y.Type && x.Status == y.Status && x.Reason == y.Reason && x.Message == y.Message
	})
}

// releaseEgress deletes the member's cluster Service and EndpointSlices
// (the group drops its target). Its externalName is left as it is, as the
// official operator leaves it.
func (g *groups) releaseEgress(ctx context.Context, obj *unstructured.Unstructured) error {
	name := ClusterServiceName(obj.GetNamespace(), obj.GetName())
	opNS := g.d.Settings.Namespace
	g.d.Forget(resources.Services, opNS, name)
	cs, err := g.d.Kube.CoreV1().Services(opNS).Get(ctx, name, metav1.GetOptions{})
	switch {
	case err == nil:
		if err := g.d.Kube.CoreV1().Services(opNS).Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete egress Service %s: %w", name, err)
		}
		g.d.Op.Enqueue(resources.ProxyGroups, cs.Labels[labelProxyGroup], 0)
	case !apierrors.IsNotFound(err):
		return fmt.Errorf("read egress Service %s: %w", name, err)
	}
	for _, family := range []discoveryv1.AddressType{discoveryv1.AddressTypeIPv4, discoveryv1.AddressTypeIPv6} {
		slice := name + "-" + strings.ToLower(string(family))
		g.d.Forget(resources.EndpointSlices, opNS, slice)
		if err := g.d.Kube.DiscoveryV1().EndpointSlices(opNS).Delete(ctx, slice, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete EndpointSlice %s: %w", slice, err)
		}
	}
	return nil
}
