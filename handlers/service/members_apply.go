package service

import (
	"context"
	"fmt"
	"reflect"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/tailplane/tailplane/handlers/lib/cluster"
	"github.com/tailplane/tailplane/handlers/lib/conditions"
	"github.com/tailplane/tailplane/handlers/lib/groupmember"
	"github.com/tailplane/tailplane/handlers/lib/pipeline"
	"github.com/tailplane/tailplane/handlers/lib/resources"
	"github.com/tailplane/tailplane/runtime"
)

// RegisterMember adds Services annotated tailscale.com/proxy-group (exposed
// or tailscale LoadBalancers, without a tailnet target: those are egress)
// as members of an ingress ProxyGroup (groupmember.ServiceKind): each is a
// Tailscale Service that every replica of the group hosts. They carry
// TailscaleIngressSvcValid and TailscaleIngressSvcConfigured and, for
// LoadBalancers, the service's MagicDNS name and IPv4 address.
func RegisterMember(op *runtime.Operator, d *cluster.Deps, p *pipeline.Pipeline, members *groupmember.Registry) {
	decode := func(obj *unstructured.Unstructured) (*corev1.Service, error) {
		svc, err := cluster.DecodeService(obj)
		if err != nil {
			return nil, runtime.Permanent(err)
		}
		return svc, nil
	}
	groupmember.RegisterServiceKind(op, d, p, members, groupmember.ServiceKind{
		Kind: "Service", Resource: resources.Services, Finalizer: finalizerProxyGroup, Index: indexGroupMembers,
		IsMember: func(obj *unstructured.Unstructured) bool { return isGroupMember(obj, ClaimOf(d.Settings)) },
		Render: func(_ context.Context, obj *unstructured.Unstructured) (*groupmember.ServiceMember, error) {
			svc, err := decode(obj)
			if err != nil {
				return nil, err
			}
			return GroupMember(svc, d.Settings)
		},
		Host: func(ctx context.Context, k runtime.Key, group string) (*groupmember.Hosted, error) {
			svc, err := d.Kube.CoreV1().Services(k.Namespace).Get(ctx, k.Name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return nil, nil
			}
			if err != nil {
				return nil, fmt.Errorf("read Service %s/%s of ProxyGroup %s: %w", k.Namespace, k.Name, group, err)
			}
			m, err := GroupMember(svc, d.Settings)
			if err != nil {
				return nil, nil // left out of the group: its own handler says why
			}
			return &groupmember.Hosted{Service: m.Service, Created: svc.CreationTimestamp}, nil
		},
		Invalid: func(ctx context.Context, obj *unstructured.Unstructured, reason, msg string) error {
			svc, err := decode(obj)
			if err != nil {
				return err
			}
			d.Post(svc, corev1.EventTypeWarning, reason, msg)
			conds := conditions.Set(svc.Status.Conditions, metav1.Condition{Type: ConditionSvcValid, Status: metav1.ConditionFalse,
				Reason: reasonSvcInvalid, Message: msg})
			conds = conditions.Remove(conds, ConditionSvcConfigured)
			return setGroupMemberStatus(ctx, d, svc, conds, nil)
		},
		Status: func(ctx context.Context, obj *unstructured.Unstructured, m *groupmember.ServiceMember, st groupmember.Status) error {
			svc, err := decode(obj)
			if err != nil {
				return err
			}
			conds, lb := groupMemberStatus(svc, m, st)
			return setGroupMemberStatus(ctx, d, svc, conds, lb)
		},
	})
}

// isGroupMember: a tailscale LoadBalancer or exposed Service that names a
// ProxyGroup and no tailnet target (those are egress).
func isGroupMember(obj *unstructured.Unstructured, claim Claim) bool {
	a := obj.GetAnnotations()
	if a[groupmember.AnnotationProxyGroup] == "" || a["tailscale.com/tailnet-fqdn"] != "" || a["tailscale.com/tailnet-ip"] != "" || a["tailscale.com/ts-tailnet-target-ip"] != "" {
		return false
	}
	if a[AnnotationExpose] == "true" {
		return true
	}
	svc, err := cluster.DecodeService(obj)
	return err == nil && IsTailscaleLoadBalancer(svc, claim)
}

// setGroupMemberStatus writes what changed of conds and, on LoadBalancers,
// of the load balancer entries.
func setGroupMemberStatus(ctx context.Context, d *cluster.Deps, svc *corev1.Service, conds []metav1.Condition, lb []corev1.LoadBalancerIngress) error {
	status := map[string]any{}
	if !reflect.DeepEqual(conds, svc.Status.Conditions) {
		status["conditions"] = cluster.OrNil(len(conds) == 0, conds)
	}
	if svc.Spec.Type == corev1.ServiceTypeLoadBalancer && !SameLoadBalancer(lb, svc.Status.LoadBalancer.Ingress) {
		status["loadBalancer"] = map[string]any{"ingress": cluster.OrNil(len(lb) == 0, lb)}
	}
	if len(status) == 0 {
		return nil
	}
	return d.PatchStatus(ctx, resources.Services, svc.Namespace, svc.Name, status)
}
