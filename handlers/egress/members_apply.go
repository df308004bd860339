package egress

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/tailplane/tailplane/crds/tailscale/v1alpha1"
	"github.com/tailplane/tailplane/handlers/lib/cluster"
	"github.com/tailplane/tailplane/handlers/lib/conditions"
	"github.com/tailplane/tailplane/handlers/lib/groupmember"
	"github.com/tailplane/tailplane/handlers/lib/pipeline"
	"github.com/tailplane/tailplane/handlers/lib/resources"
	"github.com/tailplane/tailplane/internal/proxystate"
	"github.com/tailplane/tailplane/runtime"
)

// members are the egress Services of egress ProxyGroups.
type members struct {
	d *cluster.Deps
	p *pipeline.Pipeline
	*pipeline.Members
}

// admitted is a member that may be served, with its group.
type admitted struct {
	m  *groupmember.Egress
	pg *v1alpha1.ProxyGroup
}

// RegisterMember adds egress Services annotated tailscale.com/proxy-group
// as members of an egress ProxyGroup: each gets a cluster Service in the
// operator namespace (its ports allocated by the group from the claims this
// kind makes in reg), an EndpointSlice of the replicas serving it, and its
// externalName pointed there.
func RegisterMember(op *runtime.Operator, d *cluster.Deps, p *pipeline.Pipeline, reg *groupmember.Registry) {
	ms := &members{d: d, p: p}
	ms.Members = pipeline.RegisterMember(p, op, pipeline.MemberModule[admitted]{
		ID: "proxygroup-egress", Resource: resources.Services, Kind: "Service", Finalizer: finalizerProxyGroup,
		Index: indexGroupMembers, GroupResource: resources.ProxyGroups, IsOurs: isGroupMember, Group: groupmember.GroupOf,
		Admit: ms.admit, Serve: ms.serve, Release: ms.release,
		Clear: func(ctx context.Context, obj *unstructured.Unstructured) error {
			svc, err := cluster.DecodeService(obj)
			if err != nil {
				return runtime.Permanent(err)
			}
			conds := svc.Status.Conditions
			for _, t := range []string{ConditionEgressValid, ConditionEgressConfigured, ConditionEgressReady} {
				conds = conditions.Remove(conds, t)
			}
			return ms.setConditions(ctx, svc, conds)
		},
	})
	reg.Add(ms)
}

// isGroupMember: a Service naming a ProxyGroup and a tailnet target.
func isGroupMember(obj *unstructured.Unstructured) bool {
	a := obj.GetAnnotations()
	return a[groupmember.AnnotationProxyGroup] != "" && (a[AnnotationTailnetFQDN] != "" || a[AnnotationTailnetIP] != "" ||
		a[AnnotationTailnetIPDeprecated] != "")
}

// EgressClaims are the group's admitted members (holding the finalizer,
// still naming the group, not leaving), whose ports the group allocates.
func (ms *members) EgressClaims(ctx context.Context, group string) ([]groupmember.EgressClaim, error) {
	var out []groupmember.EgressClaim
	for _, k := range ms.Keys(group) {
		svc, err := ms.d.Kube.CoreV1().Services(k.Namespace).Get(ctx, k.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("read Service %s/%s of ProxyGroup %s: %w", k.Namespace, k.Name, group, err)
		}
		if svc.DeletionTimestamp != nil || !slices.Contains(svc.Finalizers, finalizerProxyGroup) || svc.Annotations[groupmember.AnnotationProxyGroup] != group {
			continue // not admitted (yet), or leaving
		}
		m, err := GroupMember(svc, ms.d.Settings)
		if err != nil {
			continue // its own handler says why
		}
		out = append(out, groupmember.EgressClaim{Egress: m, Key: k, Refuse: func(ctx context.Context, msg string) error {
			return ms.setConditions(ctx, svc, memberConditions(svc, metav1.ConditionFalse, ReasonEgressInvalid, msg, nil))
		}})
	}
	return out, nil
}

// admit reads an egress member and checks its group.
func (ms *members) admit(ctx context.Context, obj *unstructured.Unstructured) (admitted, bool, error) {
	svc, err := cluster.DecodeService(obj)
	if err != nil {
		return admitted{}, false, runtime.Permanent(err)
	}
	refuse := func(event, msg string, valid metav1.ConditionStatus, reason string) (admitted, bool, error) {
		ms.d.Post(svc, corev1.EventTypeWarning, event, msg)
		return admitted{}, false, ms.setConditions(ctx, svc, memberConditions(svc, valid, reason, msg, nil))
	}
	m, err := GroupMember(svc, ms.d.Settings)
	if err != nil {
		return refuse(ReasonInvalidService, err.Error(), metav1.ConditionFalse, ReasonEgressInvalid)
	}
	pg, err := groupmember.Read(ctx, ms.d, m.Group)
	if err != nil {
		return admitted{}, false, err
	}
	switch {
	case pg == nil:
		return refuse(groupmember.ReasonProxyGroupNotFound, fmt.Sprintf("ProxyGroup %q does not exist", m.Group), metav1.ConditionUnknown, ReasonProxyGroupNotReady)
	case pg.Spec.Type != v1alpha1.ProxyGroupTypeEgress:
		return refuse(ReasonInvalidService, fmt.Sprintf("ProxyGroup %q is of type %q; egress Services need a ProxyGroup of type egress", m.Group, pg.Spec.Type),
			metav1.ConditionFalse, ReasonEgressInvalid)
	}
	return admitted{m: m, pg: pg}, true, nil
}

// serve gives an egress member an EndpointSlice of the replicas serving
// its cluster Service, and points the member's externalName at it; the
// group's replicas get its target. Until the group allocated the member's
// ports (its cluster Service is missing or behind the member) it waits:
// the member's change had its group handled (the member watch), and the
// group hands the member back once it did. It does not enqueue the group
// itself, so that a group out of ports does not spin.
func (ms *members) serve(ctx context.Context, obj *unstructured.Unstructured, a admitted) error {
	svc, err := cluster.DecodeService(obj)
	if err != nil {
		return runtime.Permanent(err)
	}
	m, opNS := a.m, ms.d.Settings.Namespace
	cs, err := ms.d.Kube.CoreV1().Services(opNS).Get(ctx, groupmember.ClusterServiceName(m.Namespace, m.Name), metav1.GetOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("read egress Service of %s/%s: %w", m.Namespace, m.Name, err)
	}
	if err != nil {
		cs = nil
	}
	// With nothing taken, ClusterService keeps every port cs has: it
	// differs only where the member has ports, a target or a group cs
	// lacks.
	if want, werr := groupmember.ClusterService(m, opNS, cs, nil); cs == nil || werr != nil || !groupmember.UpToDate(cs, want) {
		return nil
	}
	serving, total, err := ms.servingReplicas(ctx, a.pg, cs)
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
		if err := ms.d.Apply(ctx, endpointSlice(cs, family, ips)); err != nil {
			return err
		}
	}
	if want := externalNameOf(cs, ms.d.ClusterDomain); svc.Spec.ExternalName != want {
		patch, _ := json.Marshal(map[string]any{"spec": map[string]any{"externalName": want}})
		if _, err := ms.d.Kube.CoreV1().Services(svc.Namespace).Patch(ctx, svc.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			return fmt.Errorf("point Service %s/%s at its ProxyGroup: %w", svc.Namespace, svc.Name, err)
		}
	}
	r := &readiness{pg: a.pg.Name, serving: len(serving), total: total, hash: configHash(cs)}
	return ms.setConditions(ctx, svc, memberConditions(svc, metav1.ConditionTrue, ReasonEgressValid, ReasonEgressValid, r))
}

// servingReplicas are the pod IPs of the group's replicas that serve cs's
// target: their Pod is Ready, their device is up, the Pod's own process
// applied its config (config_applied), and that config has the target.
// total is the number of replicas.
func (ms *members) servingReplicas(ctx context.Context, pg *v1alpha1.ProxyGroup, cs *corev1.Service) ([]string, int, error) {
	want, _ := groupmember.TargetOf(cs)
	total := groupmember.Replicas(pg)
	replicas, err := groupmember.ReplicaPods(ctx, ms.d, ms.p, pg)
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
		if string(r.State.Data[proxystate.KeyConfigApplied]) != string(r.Pod.UID) || !groupmember.PodReady(r.Pod) {
			continue
		}
		for _, ip := range r.Pod.Status.PodIPs {
			out = append(out, ip.IP)
		}
	}
	return out, total, nil
}

// setConditions writes conds when they differ from svc's.
func (ms *members) setConditions(ctx context.Context, svc *corev1.Service, conds []metav1.Condition) error {
	if equalConditions(conds, svc.Status.Conditions) {
		return nil
	}
	return ms.d.PatchStatus(ctx, resources.Services, svc.Namespace, svc.Name, map[string]any{"conditions": cluster.OrNil(len(conds) == 0, conds)})
}

// release deletes the member's cluster Service and EndpointSlices (the
// group drops its target). Its externalName is left as it is, as the
// official operator leaves it.
func (ms *members) release(ctx context.Context, obj *unstructured.Unstructured) error {
	name := groupmember.ClusterServiceName(obj.GetNamespace(), obj.GetName())
	opNS := ms.d.Settings.Namespace
	ms.d.Forget(resources.Services, opNS, name)
	cs, err := ms.d.Kube.CoreV1().Services(opNS).Get(ctx, name, metav1.GetOptions{})
	switch {
	case err == nil:
		if err := ms.d.Kube.CoreV1().Services(opNS).Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete egress Service %s: %w", name, err)
		}
		ms.d.Op.Enqueue(resources.ProxyGroups, cs.Labels[groupmember.LabelProxyGroup], 0)
	case !apierrors.IsNotFound(err):
		return fmt.Errorf("read egress Service %s: %w", name, err)
	}
	for _, family := range []discoveryv1.AddressType{discoveryv1.AddressTypeIPv4, discoveryv1.AddressTypeIPv6} {
		slice := endpointSliceName(name, family)
		ms.d.Forget(resources.EndpointSlices, opNS, slice)
		if err := ms.d.Kube.DiscoveryV1().EndpointSlices(opNS).Delete(ctx, slice, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete EndpointSlice %s: %w", slice, err)
		}
	}
	return nil
}
