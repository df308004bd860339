package ingress

import (
	"context"
	"fmt"
	"reflect"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/tailplane/tailplane/handlers/lib/cluster"
	"github.com/tailplane/tailplane/handlers/lib/groupmember"
	"github.com/tailplane/tailplane/handlers/lib/ingressroutes"
	"github.com/tailplane/tailplane/handlers/lib/pipeline"
	"github.com/tailplane/tailplane/handlers/lib/resources"
	"github.com/tailplane/tailplane/handlers/plugin"
	"github.com/tailplane/tailplane/runtime"
)

// RegisterMember adds Ingresses annotated tailscale.com/proxy-group as
// members of an ingress ProxyGroup (groupmember.ServiceKind): each is a
// Tailscale Service that every replica of the group hosts, with the
// Ingress's plugins. Ingresses have no conditions, so problems are Events,
// and status.loadBalancer.ingress is the service's MagicDNS name once a
// replica advertises it.
func RegisterMember(op *runtime.Operator, d *cluster.Deps, p *pipeline.Pipeline, members *groupmember.Registry) {
	groupmember.RegisterServiceKind(op, d, p, members, groupmember.ServiceKind{
		Kind: "Ingress", Resource: resources.Ingresses, Finalizer: FinalizerProxyGroup, Index: indexGroupMembers,
		IsMember: func(obj *unstructured.Unstructured) bool { return isGroupMember(obj, d.Settings.IngressClassName) },
		Render: func(ctx context.Context, obj *unstructured.Unstructured) (*groupmember.ServiceMember, error) {
			ing, err := decode(obj)
			if err != nil {
				return nil, err
			}
			m, problems, err := GroupMember(ing, d.Settings, ingressroutes.Lookup(ctx, d.Kube, ing.Namespace))
			for _, p := range problems {
				d.Post(ing, p.Type, p.Reason, p.Message)
			}
			return m, err
		},
		Host: func(ctx context.Context, k runtime.Key, group string) (*groupmember.Hosted, error) {
			return hostGroupMember(ctx, d, k, group)
		},
		Invalid: func(ctx context.Context, obj *unstructured.Unstructured, reason, msg string) error {
			ing, err := decode(obj)
			if err != nil {
				return err
			}
			d.Post(ing, corev1.EventTypeWarning, reason, msg)
			if len(ing.Status.LoadBalancer.Ingress) == 0 {
				return nil
			}
			return d.PatchStatus(ctx, resources.Ingresses, ing.Namespace, ing.Name, map[string]any{"loadBalancer": map[string]any{"ingress": nil}})
		},
		Status: func(ctx context.Context, obj *unstructured.Unstructured, m *groupmember.ServiceMember, st groupmember.Status) error {
			ing, err := decode(obj)
			if err != nil {
				return err
			}
			lb := groupMemberStatus(m, st)
			if reflect.DeepEqual(lb, ing.Status.LoadBalancer.Ingress) || (len(lb) == 0 && len(ing.Status.LoadBalancer.Ingress) == 0) {
				return nil
			}
			return d.PatchStatus(ctx, resources.Ingresses, ing.Namespace, ing.Name, map[string]any{"loadBalancer": map[string]any{"ingress": cluster.OrNil(len(lb) == 0, lb)}})
		},
	})
}

// isGroupMember: an Ingress of our class that names a ProxyGroup.
func isGroupMember(obj *unstructured.Unstructured, className string) bool {
	if groupmember.GroupOf(obj) == "" {
		return false
	}
	class, _, _ := unstructured.NestedString(obj.Object, "spec", "ingressClassName")
	return class == className
}

// hostGroupMember reads the member with key and renders it, with the
// plugins that target it, for its group's replicas; nil when it is gone or
// cannot be served (its own handler says why).
func hostGroupMember(ctx context.Context, d *cluster.Deps, k runtime.Key, group string) (*groupmember.Hosted, error) {
	ing, err := d.Kube.NetworkingV1().Ingresses(k.Namespace).Get(ctx, k.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read Ingress %s/%s of ProxyGroup %s: %w", k.Namespace, k.Name, group, err)
	}
	m, _, err := GroupMember(ing, d.Settings, ingressroutes.Lookup(ctx, d.Kube, ing.Namespace))
	if err != nil {
		return nil, nil // left out of the group: its own handler says why
	}
	h := &groupmember.Hosted{Service: m.Service, Secrets: []string{m.Service.L7.TLS.SecretName}, Created: ing.CreationTimestamp}
	plugins, secrets, err := plugin.Targeting(ctx, d, "Ingress", ing.Namespace, ing.Name, ing.Labels)
	if err != nil {
		return nil, err
	}
	h.Service.Plugins, h.Secrets = plugins, append(h.Secrets, secrets...)
	return h, nil
}
