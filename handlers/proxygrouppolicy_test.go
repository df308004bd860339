package handlers_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/tailplane/tailplane/crds/tailscale/v1alpha1"
	"github.com/tailplane/tailplane/handlers/lib/resources"
	"github.com/tailplane/tailplane/handlers/proxygrouppolicy"
	"github.com/tailplane/tailplane/internal/testpoll"
)

// pgpObjects are the three objects of the official e2e TestProxyGroupPolicy,
// each naming ProxyGroup group: an egress ExternalName Service, an ingress
// LoadBalancer Service and an Ingress.
func pgpObjects(ns, suffix, group string) []func(ctx context.Context, h *harness, dryRun bool) error {
	ann := map[string]string{proxygrouppolicy.AnnotationProxyGroup: group}
	class, ingressClass := "tailscale", "tailscale"
	opts := func(dryRun bool) metav1.CreateOptions {
		if dryRun {
			return metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}
		}
		return metav1.CreateOptions{}
	}
	return []func(ctx context.Context, h *harness, dryRun bool) error{
		func(ctx context.Context, h *harness, dryRun bool) error {
			_, err := h.kube.CoreV1().Services(ns).Create(ctx, &corev1.Service{
				ObjectMeta: metav1.ObjectMeta{Name: "egress-" + suffix, Annotations: ann},
				Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "placeholder.example.com"},
			}, opts(dryRun))
			return err
		},
		func(ctx context.Context, h *harness, dryRun bool) error {
			_, err := h.kube.CoreV1().Services(ns).Create(ctx, &corev1.Service{
				ObjectMeta: metav1.ObjectMeta{Name: "ingress-" + suffix, Annotations: ann},
				Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, LoadBalancerClass: &class,
					Ports: []corev1.ServicePort{{Port: 80}}},
			}, opts(dryRun))
			return err
		},
		func(ctx context.Context, h *harness, dryRun bool) error {
			_, err := h.kube.NetworkingV1().Ingresses(ns).Create(ctx, &networkingv1.Ingress{
				ObjectMeta: metav1.ObjectMeta{Name: "ing-" + suffix, Annotations: ann},
				Spec: networkingv1.IngressSpec{IngressClassName: &ingressClass, DefaultBackend: &networkingv1.IngressBackend{
					Service: &networkingv1.IngressServiceBackend{Name: "web", Port: networkingv1.ServiceBackendPort{Number: 80}}}},
			}, opts(dryRun))
			return err
		},
	}
}

func (h *harness) createPolicy(name, spec string) {
	h.t.Helper()
	obj := &unstructured.Unstructured{}
	if err := obj.UnmarshalJSON(fmt.Appendf(nil, `{"apiVersion":"tailscale.com/v1alpha1","kind":"ProxyGroupPolicy","metadata":{"name":%q,"namespace":%q},"spec":%s}`, name, h.ns, spec)); err != nil {
		h.t.Fatal(err)
	}
	if _, err := h.dyn.Resource(resources.ProxyGroupPolicies).Namespace(h.ns).Create(h.ctx(), obj, metav1.CreateOptions{}); err != nil {
		h.t.Fatal(err)
	}
}

func (h *harness) wantPolicyReady(name, msgPart string) {
	h.t.Helper()
	testpoll.Until(h.t, settle, "ProxyGroupPolicyReady of "+name, func() error {
		obj, err := h.dyn.Resource(resources.ProxyGroupPolicies).Namespace(h.ns).Get(h.ctx(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		conds, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
		for _, c := range conds {
			m := c.(map[string]any)
			if m["type"] == v1alpha1.ProxyGroupPolicyReady {
				if m["status"] != "True" || m["reason"] != proxygrouppolicy.ReasonEnforced || !strings.Contains(fmt.Sprint(m["message"]), msgPart) {
					return fmt.Errorf("condition %v, want True/%s containing %q", m, proxygrouppolicy.ReasonEnforced, msgPart)
				}
				return nil
			}
		}
		return fmt.Errorf("no condition in %v", conds)
	})
}

// The official e2e TestProxyGroupPolicy, against the operator's real RBAC:
// a deny-all policy makes the API server refuse the three objects naming a
// ProxyGroup, with the official message; an allow policy lets them in;
// objects without the annotation are never refused; deleting the policies
// removes the admission policies.
func TestProxyGroupPolicyAdmission(t *testing.T) {
	h := newHarnessOpts(t, true, nil)

	// No policy: everything is admitted.
	for i, create := range pgpObjects(h.ns, "before", "test") {
		if err := create(h.ctx(), h, false); err != nil {
			t.Fatalf("object %d refused without any policy: %v", i, err)
		}
	}

	h.createPolicy("deny-all", `{}`)
	h.wantPolicyReady("deny-all", "ingress ProxyGroups none, egress ProxyGroups none")
	const denied = `Annotation "tailscale.com/proxy-group" cannot be used on this resource in this namespace`
	for i, create := range pgpObjects(h.ns, "denied", "test") {
		// The API server picks up new admission policies within a second
		// or so: wait for the refusal of a dry run, then create for real.
		testpoll.Until(t, settle, fmt.Sprintf("object %d refused", i), func() error {
			if create(h.ctx(), h, true) == nil {
				return fmt.Errorf("admitted")
			}
			return nil
		})
		err := create(h.ctx(), h, false)
		if err == nil || !strings.Contains(err.Error(), "ValidatingAdmissionPolicy") || !strings.Contains(err.Error(), denied) {
			t.Fatalf("object %d: got %v, want a ValidatingAdmissionPolicy refusal with %q", i, err, denied)
		}
	}
	// Objects that name no ProxyGroup are not the policy's business.
	if _, err := h.kube.CoreV1().Services(h.ns).Create(h.ctx(), &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "plain"},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("a Service without annotations was refused: %v", err)
	}

	h.createPolicy("allow-test", `{"ingress":["test"],"egress":["test"]}`)
	h.wantPolicyReady("allow-test", "ingress ProxyGroups [test], egress ProxyGroups [test]")
	for i, create := range pgpObjects(h.ns, "allowed", "test") {
		testpoll.Until(t, settle, fmt.Sprintf("object %d admitted", i), func() error { return create(h.ctx(), h, false) })
	}
	// Another group is still refused, with the allowed list.
	err := pgpObjects(h.ns, "other", "other")[0](h.ctx(), h, false)
	if want := `If set, annotation "tailscale.com/proxy-group" must be one of [test]`; err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("a Service naming ProxyGroup other: got %v, want %q", err, want)
	}

	// Deleting the policies, even while the operator is down, deletes the
	// admission policies (the finalizer holds the last policy until then)
	// and admits everything again.
	h.stop()
	for _, name := range []string{"deny-all", "allow-test"} {
		if err := h.dyn.Resource(resources.ProxyGroupPolicies).Namespace(h.ns).Delete(h.ctx(), name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	h.start()
	testpoll.Until(t, settle, "admission policies deleted", func() error {
		for _, name := range []string{proxygrouppolicy.IngressName(h.ns), proxygrouppolicy.EgressName(h.ns)} {
			if _, err := h.dyn.Resource(resources.ValidatingAdmissionPolicies).Get(h.ctx(), name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				return fmt.Errorf("policy %s: %v", name, err)
			}
			if _, err := h.dyn.Resource(resources.ValidatingAdmissionPolicyBindings).Get(h.ctx(), name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				return fmt.Errorf("binding %s: %v", name, err)
			}
		}
		list, err := h.dyn.Resource(resources.ProxyGroupPolicies).Namespace(h.ns).List(h.ctx(), metav1.ListOptions{})
		if err != nil || len(list.Items) != 0 {
			return fmt.Errorf("policies left: %v %v", list, err)
		}
		return nil
	})
	testpoll.Until(t, settle, "other group admitted", func() error { return pgpObjects(h.ns, "other", "other")[0](h.ctx(), h, false) })
}

// Without the RBAC for admission policies the policy says so (condition
// False and a Warning Event naming the refusal), and is enforced as soon as
// the RBAC is back.
func TestProxyGroupPolicyWithoutRBAC(t *testing.T) {
	h := newHarnessOpts(t, true, nil)
	roles := h.kube.RbacV1().ClusterRoles()
	role, err := roles.Get(h.ctx(), "tailplane-operator", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	reduced := role.DeepCopy()
	reduced.Rules = nil
	for _, r := range role.Rules {
		if len(r.APIGroups) == 1 && r.APIGroups[0] == "admissionregistration.k8s.io" {
			continue
		}
		reduced.Rules = append(reduced.Rules, r)
	}
	if len(reduced.Rules) == len(role.Rules) {
		t.Fatal("the operator's ClusterRole has no rule for admissionregistration.k8s.io")
	}
	if _, err := roles.Update(h.ctx(), reduced, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.applyManifests)

	h.createPolicy("deny-all", `{}`)
	testpoll.Until(t, settle, "ProxyGroupPolicyNotEnforced", func() error {
		obj, err := h.dyn.Resource(resources.ProxyGroupPolicies).Namespace(h.ns).Get(h.ctx(), "deny-all", metav1.GetOptions{})
		if err != nil {
			return err
		}
		conds, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
		for _, c := range conds {
			m := c.(map[string]any)
			if m["reason"] == proxygrouppolicy.ReasonNotEnforced && m["status"] == "False" && strings.Contains(fmt.Sprint(m["message"]), "forbidden") {
				return nil
			}
		}
		return fmt.Errorf("conditions %v", conds)
	})
	h.wantEvent(h.ns, "deny-all", corev1.EventTypeWarning, proxygrouppolicy.ReasonNotEnforced, "forbidden")

	h.applyManifests() // the RBAC is back
	h.wantPolicyReady("deny-all", "ingress ProxyGroups none")
	if err := h.dyn.Resource(resources.ProxyGroupPolicies).Namespace(h.ns).Delete(h.ctx(), "deny-all", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testpoll.Until(t, settle, "policy deleted", func() error {
		if _, err := h.dyn.Resource(resources.ValidatingAdmissionPolicies).Get(h.ctx(), proxygrouppolicy.EgressName(h.ns), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("admission policy: %v", err)
		}
		return nil
	})
}
