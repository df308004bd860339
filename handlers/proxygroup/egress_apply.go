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
	"github.com/tailplane/tailplane/handlers/lib/resources"
	"github.com/tailplane/tailplane/internal/proxystate"
	"github.com/tailplane/tailplane/proxy/config"
	"github.com/tailplane/tailplane/runtime"
)

// IndexEgressMembers: ProxyGroup name -> "namespace/name" of its egress
// members.
const IndexEgressMembers = "proxygroup-egress"

// isEgressMember: a Service naming a ProxyGroup and a tailnet target.
func isEgressMember(obj *unstructured.Unstructured) bool {
	a := obj.GetAnnotations()
	return a[AnnotationProxyGroup] != "" && (a[egress.AnnotationTailnetFQDN] != "" || a[egress.AnnotationTailnetIP] != "" ||
		a[egress.AnnotationTailnetIPDeprecated] != "")
}

// registerEgress adds the egress members' handlers, their index, and a watch
// of the groups' Pods (a replica's readiness, address or shutdown changes
// the group's status and the egress members' EndpointSlices).
func registerEgress(op *runtime.Operator, g *groups) {
	op.Index(resources.Services, IndexEgressMembers, func(obj *unstructured.Unstructured) map[string]any {
		if !isEgressMember(obj) {
			return nil
		}
		return map[string]any{obj.GetAnnotations()[AnnotationProxyGroup]: obj.GetNamespace() + "/" + obj.GetName()}
	}, g.d.Scope()...)
	opts := g.d.Scope(runtime.When(runtime.Or(isEgressMember, hasFinalizer(FinalizerEgress))), g.d.StateStore())
	op.On(resources.Services, "proxygroup-egress-sync", func(ctx context.Context, ev *runtime.Event) (any, error) {
		if !isEgressMember(ev.Object) {
			return nil, cluster.Retry(g.releaseEgress(ctx, ev.Object, true), ev.Retry)
		}
		return nil, cluster.Retry(g.serveEgress(ctx, ev.Object), ev.Retry)
	}, append(opts, runtime.Causes(runtime.CauseCreate, runtime.CauseUpdate, runtime.CauseResume, runtime.CauseEnqueue))...)
	op.OnDelete(resources.Services, "proxygroup-egress-cleanup", func(ctx context.Context, ev *runtime.Event) (any, error) {
		return nil, cluster.Retry(g.releaseEgress(ctx, ev.Object, false), ev.Retry)
	}, opts...)
	sel := labels.SelectorFromSet(labels.Set{proxystate.LabelManaged: "true", proxystate.LabelParentType: ParentType}).String()
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
		t, ok := TargetOf(&list[i])
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
	sel := labels.SelectorFromSet(labels.Set{LabelProxyGroup: group, LabelSvcType: SvcTypeEgress}).String()
	list, err := g.d.Kube.CoreV1().Services(g.d.Settings.Namespace).List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return nil, fmt.Errorf("list egress Services of ProxyGroup %s: %w", group, err)
	}
	sort.Slice(list.Items, func(i, j int) bool { return list.Items[i].Name < list.Items[j].Name })
	return list.Items, nil
}

// serveEgress gives an egress member its cluster Service (ports allocated in
// the group), an EndpointSlice of the replicas serving it, and points the
// member's externalName at it; the group's replicas get its target.
func (g *groups) serveEgress(ctx context.Context, obj *unstructured.Unstructured) error {
	svc, err := cluster.DecodeService(obj)
	if err != nil {
		return runtime.Permanent(err)
	}
	m, err := EgressMemberOf(svc, g.d.Settings)
	if err != nil {
		g.d.Post(svc, corev1.EventTypeWarning, ReasonInvalidService, err.Error())
		return g.egressStatus(ctx, svc, metav1.ConditionFalse, ReasonEgressInvalid, err.Error(), nil)
	}
	pg, err := g.group(ctx, m.Group)
	if err != nil {
		return err
	}
	switch {
	case pg == nil:
		msg := fmt.Sprintf("ProxyGroup %q does not exist", m.Group)
		g.d.Post(svc, corev1.EventTypeWarning, ReasonProxyGroupNotFound, msg)
		return g.egressStatus(ctx, svc, metav1.ConditionUnknown, ReasonProxyGroupNotReady, msg, nil)
	case pg.Spec.Type != v1alpha1.ProxyGroupTypeEgress:
		msg := fmt.Sprintf("ProxyGroup %q is of type %q; egress Services need a ProxyGroup of type egress", m.Group, pg.Spec.Type)
		g.d.Post(svc, corev1.EventTypeWarning, ReasonInvalidService, msg)
		return g.egressStatus(ctx, svc, metav1.ConditionFalse, ReasonEgressInvalid, msg, nil)
	}
	if err := g.addFinalizer(ctx, &memberKind{kind: "Service", resource: resources.Services, finalizer: FinalizerEgress}, obj); err != nil {
		return err
	}
	// One member of a group at a time picks its ports, so that two never
	// take the same one.
	unlock := g.lockGroup(m.Group)
	defer unlock()
	others, err := g.clusterServices(ctx, m.Group)
	if err != nil {
		return err
	}
	name := ClusterServiceName(m.Namespace, m.Name)
	var existing *corev1.Service
	taken := map[int32]bool{}
	for i := range others {
		if others[i].Name == name {
			existing = &others[i]
			continue
		}
		for _, p := range others[i].Spec.Ports {
			taken[p.TargetPort.IntVal] = true
		}
	}
	cs, err := ClusterService(m, g.d.Settings.Namespace, existing, taken)
	if err != nil {
		return g.egressStatus(ctx, svc, metav1.ConditionFalse, ReasonEgressInvalid, err.Error(), nil)
	}
	if err := g.d.Apply(ctx, cs); err != nil {
		return err
	}
	if existing == nil || !slices.Equal(existing.Spec.Ports, cs.Spec.Ports) || !mapsEqual(existing.Annotations, cs.Annotations) {
		// The replicas' configs follow the cluster Services.
		g.d.Op.Enqueue(resources.ProxyGroups, pg.Name, 0)
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
		if err := g.d.Apply(ctx, Slice(cs, family, ips)); err != nil {
			return err
		}
	}
	if want := ExternalNameOf(cs, g.d.ClusterDomain); svc.Spec.ExternalName != want {
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
	want, _ := TargetOf(cs)
	total := Replicas(pg)
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
	b, _ := json.Marshal([]any{cs.Spec.Ports, cs.Annotations, cs.Labels[LabelProxyGroup]})
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
			ready.Status, ready.Reason = metav1.ConditionFalse, ReasonNoProxies
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
// (the group drops its target), clears its conditions when it only left the
// group, and removes the finalizer. Its externalName is left as it is, as
// the official operator leaves it.
func (g *groups) releaseEgress(ctx context.Context, obj *unstructured.Unstructured, clearStatus bool) error {
	name := ClusterServiceName(obj.GetNamespace(), obj.GetName())
	opNS := g.d.Settings.Namespace
	g.d.Forget(resources.Services, opNS, name)
	cs, err := g.d.Kube.CoreV1().Services(opNS).Get(ctx, name, metav1.GetOptions{})
	switch {
	case err == nil:
		if err := g.d.Kube.CoreV1().Services(opNS).Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete egress Service %s: %w", name, err)
		}
		g.d.Op.Enqueue(resources.ProxyGroups, cs.Labels[LabelProxyGroup], 0)
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
	if clearStatus {
		svc, err := cluster.DecodeService(obj)
		if err != nil {
			return runtime.Permanent(err)
		}
		conds := svc.Status.Conditions
		for _, t := range []string{ConditionEgressValid, ConditionEgressConfigured, ConditionEgressReady} {
			conds = conditions.Remove(conds, t)
		}
		if !equalConditions(conds, svc.Status.Conditions) {
			if err := g.d.PatchStatus(ctx, resources.Services, svc.Namespace, svc.Name, map[string]any{"conditions": orNil(len(conds) == 0, conds)}); err != nil {
				return err
			}
		}
	}
	return g.removeFinalizer(ctx, &memberKind{kind: "Service", resource: resources.Services, finalizer: FinalizerEgress}, obj)
}
