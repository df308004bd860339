package proxygrouppolicy

import (
	"context"
	"fmt"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/tailplane/tailplane/crds/tailscale/v1alpha1"
	"github.com/tailplane/tailplane/handlers/lib/cluster"
	"github.com/tailplane/tailplane/handlers/lib/conditions"
	"github.com/tailplane/tailplane/handlers/lib/resources"
	"github.com/tailplane/tailplane/runtime"
)

type module struct {
	d *cluster.Deps
	// mu makes each namespace's list-render-apply one step: two policies of
	// a namespace handled at once must not apply a merge that misses one.
	mu sync.Mutex
}

// Register adds the ProxyGroupPolicy handlers: any change of a policy
// re-renders its namespace's admission policies from every policy there;
// deleting the last one deletes them (the finalizer holds the policy until
// then). Each policy gets ProxyGroupPolicyReady, and a Warning Event when
// the admission policies cannot be written.
func Register(op *runtime.Operator, d *cluster.Deps) {
	m := &module{d: d}
	op.OnCreate(resources.ProxyGroupPolicies, "proxygrouppolicy-create", m.handle, d.Scope()...)
	op.OnUpdate(resources.ProxyGroupPolicies, "proxygrouppolicy-update", m.handle, d.Scope()...)
	op.OnResume(resources.ProxyGroupPolicies, "proxygrouppolicy-resume", m.handle, d.Scope()...)
	op.OnDelete(resources.ProxyGroupPolicies, "proxygrouppolicy-delete", func(ctx context.Context, ev *runtime.Event) (any, error) {
		if _, _, err := m.sync(ctx, ev.Object.GetNamespace()); err != nil {
			return nil, err
		}
		return nil, nil
	}, d.Scope()...)
}

func (m *module) handle(ctx context.Context, ev *runtime.Event) (any, error) {
	var p v1alpha1.ProxyGroupPolicy
	if err := cluster.FromUnstructured(ev.Object, &p); err != nil {
		return nil, runtime.Permanent(err)
	}
	p.APIVersion, p.Kind = v1alpha1.GroupVersion.String(), "ProxyGroupPolicy"
	ingress, egress, err := m.sync(ctx, p.Namespace)
	cond := metav1.Condition{Type: v1alpha1.ProxyGroupPolicyReady, ObservedGeneration: p.Generation}
	if err != nil {
		cond.Status, cond.Reason = metav1.ConditionFalse, ReasonNotEnforced
		cond.Message = fmt.Sprintf("the admission policies of namespace %s could not be written: %v", p.Namespace, err)
		if conditions.Changed(p.Status.Conditions, cond) {
			m.d.Post(&p, corev1.EventTypeWarning, ReasonNotEnforced, cond.Message)
		}
	} else {
		cond.Status, cond.Reason = metav1.ConditionTrue, ReasonEnforced
		cond.Message = fmt.Sprintf("enforced at admission by ValidatingAdmissionPolicies %s and %s, merged with the namespace's other ProxyGroupPolicies: ingress ProxyGroups %s, egress ProxyGroups %s",
			IngressName(p.Namespace), EgressName(p.Namespace), list(ingress), list(egress))
	}
	conds := conditions.Set(p.Status.Conditions, cond)
	if perr := m.d.PatchStatus(ctx, resources.ProxyGroupPolicies, p.Namespace, p.Name, map[string]any{"conditions": conds}); perr != nil && err == nil {
		err = perr
	}
	return nil, err
}

func list(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return "[" + strings.Join(names, ", ") + "]"
}

// sync makes a namespace's admission policies match its ProxyGroupPolicies
// (those being deleted aside), and returns the ProxyGroups allowed.
func (m *module) sync(ctx context.Context, namespace string) (ingress, egress []string, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	items, err := m.d.Dyn.Resource(resources.ProxyGroupPolicies).Namespace(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, nil, fmt.Errorf("list ProxyGroupPolicies in %s: %w", namespace, err)
	}
	var live []v1alpha1.ProxyGroupPolicy
	for i := range items.Items {
		u := &items.Items[i]
		if u.GetDeletionTimestamp() != nil {
			continue
		}
		var p v1alpha1.ProxyGroupPolicy
		if err := cluster.FromUnstructured(u, &p); err != nil {
			return nil, nil, err
		}
		live = append(live, p)
	}
	if len(live) == 0 {
		return nil, nil, m.remove(ctx, namespace)
	}
	ingress, egress = Merge(live)
	for _, obj := range Render(namespace, ingress, egress) {
		if err := m.d.Apply(ctx, obj); err != nil {
			return nil, nil, fmt.Errorf("%w (the operator needs Kubernetes 1.30 or later and the chart's RBAC for ValidatingAdmissionPolicies)", err)
		}
	}
	return ingress, egress, nil
}

// remove deletes a namespace's admission policies and bindings.
func (m *module) remove(ctx context.Context, namespace string) error {
	for _, name := range []string{IngressName(namespace), EgressName(namespace)} {
		for _, gvr := range []schema.GroupVersionResource{resources.ValidatingAdmissionPolicyBindings, resources.ValidatingAdmissionPolicies} {
			m.d.Forget(gvr, "", name)
			err := m.d.Dyn.Resource(gvr).Delete(ctx, name, metav1.DeleteOptions{})
			if err != nil && !apierrors.IsNotFound(err) {
				return fmt.Errorf("delete %s %s: %w", gvr.Resource, name, err)
			}
		}
	}
	return nil
}
