package proxygroup

import (
	"context"
	"reflect"
	"slices"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/tailplane/tailplane/handlers/ingress"
	"github.com/tailplane/tailplane/handlers/lib/cluster"
	"github.com/tailplane/tailplane/handlers/lib/conditions"
	"github.com/tailplane/tailplane/handlers/lib/resources"
	"github.com/tailplane/tailplane/handlers/service"
	"github.com/tailplane/tailplane/runtime"
)

// ingressKind: Ingresses have no conditions, so problems are Events, and
// status.loadBalancer.ingress is the service's MagicDNS name with its ports
// once a replica advertises it.
func (g *groups) ingressKind() *memberKind {
	decodeIng := func(obj *unstructured.Unstructured) (*networkingv1.Ingress, error) {
		var ing networkingv1.Ingress
		if err := cluster.FromUnstructured(obj, &ing); err != nil {
			return nil, runtime.Permanent(err)
		}
		ing.APIVersion, ing.Kind = "networking.k8s.io/v1", "Ingress"
		return &ing, nil
	}
	return &memberKind{
		kind: "Ingress", resource: resources.Ingresses, finalizer: FinalizerIngress, index: indexIngressMembers, isMember: g.isIngressMember,
		render: func(ctx context.Context, obj *unstructured.Unstructured) (*member, error) {
			ing, err := decodeIng(obj)
			if err != nil {
				return nil, err
			}
			m, err := ingressMember(ing, g.d.Settings, ingress.Lookup(ctx, g.d.Kube, ing.Namespace))
			if err == nil {
				for _, p := range m.Problems {
					g.d.Post(ing, p.Type, p.Reason, p.Message)
				}
			}
			return m, err
		},
		invalid: func(ctx context.Context, obj *unstructured.Unstructured, reason, msg string) error {
			ing, err := decodeIng(obj)
			if err != nil {
				return err
			}
			g.d.Post(ing, corev1.EventTypeWarning, reason, msg)
			if len(ing.Status.LoadBalancer.Ingress) == 0 {
				return nil
			}
			return g.d.PatchStatus(ctx, resources.Ingresses, ing.Namespace, ing.Name, map[string]any{"loadBalancer": map[string]any{"ingress": nil}})
		},
		status: func(ctx context.Context, obj *unstructured.Unstructured, m *member, st memberStatus) error {
			ing, err := decodeIng(obj)
			if err != nil {
				return err
			}
			var lb []networkingv1.IngressLoadBalancerIngress
			if m != nil && st.Advertising > 0 && st.DNSName != "" {
				ports := []networkingv1.IngressPortStatus{{Port: 443, Protocol: corev1.ProtocolTCP}}
				if len(m.Ports) > 1 {
					ports = append(ports, networkingv1.IngressPortStatus{Port: 80, Protocol: corev1.ProtocolTCP})
				}
				lb = []networkingv1.IngressLoadBalancerIngress{{Hostname: st.DNSName, Ports: ports}}
			}
			if reflect.DeepEqual(lb, ing.Status.LoadBalancer.Ingress) || (len(lb) == 0 && len(ing.Status.LoadBalancer.Ingress) == 0) {
				return nil
			}
			return g.d.PatchStatus(ctx, resources.Ingresses, ing.Namespace, ing.Name, map[string]any{"loadBalancer": map[string]any{"ingress": orNil(len(lb) == 0, lb)}})
		},
	}
}

// serviceKind: Services carry TailscaleIngressSvcValid and
// TailscaleIngressSvcConfigured, and, for LoadBalancers, the service's
// MagicDNS name and IPv4 address.
func (g *groups) serviceKind() *memberKind {
	setStatus := func(ctx context.Context, svc *corev1.Service, conds []metav1.Condition, lb []corev1.LoadBalancerIngress, writeLB bool) error {
		status := map[string]any{}
		if !reflect.DeepEqual(conds, svc.Status.Conditions) {
			status["conditions"] = orNil(len(conds) == 0, conds)
		}
		if writeLB && !service.SameLoadBalancer(lb, svc.Status.LoadBalancer.Ingress) {
			status["loadBalancer"] = map[string]any{"ingress": orNil(len(lb) == 0, lb)}
		}
		if len(status) == 0 {
			return nil
		}
		return g.d.PatchStatus(ctx, resources.Services, svc.Namespace, svc.Name, status)
	}
	return &memberKind{
		kind: "Service", resource: resources.Services, finalizer: finalizerService, index: indexServiceMembers, isMember: g.isServiceMember,
		render: func(_ context.Context, obj *unstructured.Unstructured) (*member, error) {
			svc, err := cluster.DecodeService(obj)
			if err != nil {
				return nil, runtime.Permanent(err)
			}
			return serviceMember(svc, g.d.Settings)
		},
		invalid: func(ctx context.Context, obj *unstructured.Unstructured, reason, msg string) error {
			svc, err := cluster.DecodeService(obj)
			if err != nil {
				return runtime.Permanent(err)
			}
			g.d.Post(svc, corev1.EventTypeWarning, reason, msg)
			conds := conditions.Set(svc.Status.Conditions, metav1.Condition{Type: ConditionSvcValid, Status: metav1.ConditionFalse,
				Reason: reasonSvcInvalid, Message: msg})
			conds = conditions.Remove(conds, ConditionSvcConfigured)
			return setStatus(ctx, svc, conds, nil, svc.Spec.Type == corev1.ServiceTypeLoadBalancer)
		},
		status: func(ctx context.Context, obj *unstructured.Unstructured, m *member, st memberStatus) error {
			svc, err := cluster.DecodeService(obj)
			if err != nil {
				return runtime.Permanent(err)
			}
			isLB := svc.Spec.Type == corev1.ServiceTypeLoadBalancer
			if m == nil {
				conds := conditions.Remove(conditions.Remove(svc.Status.Conditions, ConditionSvcValid), ConditionSvcConfigured)
				return setStatus(ctx, svc, conds, nil, isLB)
			}
			// A valid member has no Valid condition, as with the official
			// operator, which writes it only as False; one left from an
			// earlier invalid spec goes (the official leaves it stale).
			conds := conditions.Remove(svc.Status.Conditions, ConditionSvcValid)
			configured := metav1.Condition{Type: ConditionSvcConfigured, Status: metav1.ConditionFalse, Reason: ReasonSvcNoBackends,
				Message: sprintf(messageBackendsAdvertising, st.Advertising, st.Total)}
			var lb []corev1.LoadBalancerIngress
			if st.Advertising > 0 {
				configured.Status, configured.Reason = metav1.ConditionTrue, ReasonSvcConfigured
				// One entry with both, as the official operator writes it
				// (clients read ingress[0].ip).
				entry := corev1.LoadBalancerIngress{Hostname: st.DNSName}
				if i := slices.IndexFunc(st.Addrs, isIPv4); i >= 0 {
					entry.IP = st.Addrs[i]
				}
				if entry.Hostname != "" || entry.IP != "" {
					lb = []corev1.LoadBalancerIngress{entry}
				}
			}
			return setStatus(ctx, svc, conditions.Set(conds, configured), lb, isLB)
		},
	}
}
