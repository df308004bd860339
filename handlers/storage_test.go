package handlers_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/tailplane/tailplane/handlers/lib/resources"
	"github.com/tailplane/tailplane/internal/testpoll"
)

// stateOf returns the runtime's state ConfigMap of one of the user's
// objects (resource "services", "ingresses"; cluster-scoped ones with
// namespace ""), or nil.
func (h *harness) stateOfIn(resource, namespace, name string) *corev1.ConfigMap {
	h.t.Helper()
	list, err := h.kube.CoreV1().ConfigMaps(h.opNS).List(h.ctx(), metav1.ListOptions{LabelSelector: "tailplane.dev/storage=tailplane-state"})
	if err != nil {
		h.t.Fatal(err)
	}
	for i, cm := range list.Items {
		var ref struct{ Resource, Namespace, Name string }
		if json.Unmarshal([]byte(cm.Annotations["tailplane.dev/object"]), &ref) == nil &&
			ref.Resource == resource && ref.Namespace == namespace && ref.Name == name {
			return &list.Items[i]
		}
	}
	return nil
}

func (h *harness) stateOf(resource, name string) *corev1.ConfigMap {
	return h.stateOfIn(resource, h.ns, name)
}

// With the chart's RBAC, the operator writes nothing on the IngressClass
// (it may only read it) and, on Services and Ingresses, nothing but the
// finalizer and status: its progress lives in ConfigMaps of its namespace,
// survives a restart (resume, not create) and goes with the objects.
func TestNothingWrittenOnUsersObjects(t *testing.T) {
	h := newHarnessOpts(t, true, nil)
	class, err := h.kube.NetworkingV1().IngressClasses().Get(h.ctx(), "tailscale", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	h.backend("web", 8080)
	h.createService(exposed("exp", nil))
	h.createIngress("site", nil, networkingv1.IngressSpec{DefaultBackend: defaultBackend("web", 8080)})
	testpoll.Until(t, settle, "proxies", func() error {
		return errors.Join(h.proxyExists("svc", "exp"), h.proxyExists("ingress", "site"))
	})
	testpoll.Until(t, settle, "state kept in the operator namespace", func() error {
		for _, s := range []*corev1.ConfigMap{h.stateOf("services", "exp"), h.stateOf("ingresses", "site"), h.stateOfIn("ingressclasses", "", "tailscale")} {
			if s == nil || s.Data["last-handled"] == "" {
				return fmt.Errorf("missing or unfinished state: %+v", s)
			}
		}
		return nil
	})
	onlyOurs := func() error {
		now, err := h.kube.NetworkingV1().IngressClasses().Get(h.ctx(), "tailscale", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if now.ResourceVersion != class.ResourceVersion {
			return fmt.Errorf("IngressClass written: %v %v", now.Annotations, now.Finalizers)
		}
		svc := h.service("exp")
		if !maps.Equal(svc.Annotations, map[string]string{"tailscale.com/expose": "true"}) || !slices.Equal(svc.Finalizers, []string{"tailscale.com/finalizer"}) {
			return fmt.Errorf("Service: annotations %v, finalizers %v", svc.Annotations, svc.Finalizers)
		}
		ing, err := h.kube.NetworkingV1().Ingresses(h.ns).Get(h.ctx(), "site", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if len(ing.Annotations) > 0 || !slices.Equal(ing.Finalizers, []string{"tailscale.com/finalizer"}) {
			return fmt.Errorf("Ingress: annotations %v, finalizers %v", ing.Annotations, ing.Finalizers)
		}
		return nil
	}
	if err := onlyOurs(); err != nil {
		t.Fatal(err)
	}

	h.restart()
	h.wantEvent(h.ns, "exp", corev1.EventTypeNormal, "Handled", `"service-sync" succeeded (resume)`)
	h.wantEvent(h.ns, "site", corev1.EventTypeNormal, "Handled", `"ingress-sync" succeeded (resume)`)
	if err := onlyOurs(); err != nil {
		t.Fatal(err)
	}

	if err := h.kube.CoreV1().Services(h.ns).Delete(h.ctx(), "exp", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := h.kube.NetworkingV1().Ingresses(h.ns).Delete(h.ctx(), "site", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testpoll.Until(t, settle, "state removed with the objects", func() error {
		if s := h.stateOf("services", "exp"); s != nil {
			return fmt.Errorf("Service state %s left", s.Name)
		}
		if s := h.stateOf("ingresses", "site"); s != nil {
			return fmt.Errorf("Ingress state %s left", s.Name)
		}
		return errors.Join(h.proxyGone("svc", "exp"), h.proxyGone("ingress", "site"))
	})
}

// An exposed ExternalName Service whose name does not resolve is not Ready,
// with a message naming the name, until it resolves.
func TestExternalNameNotReadyUntilItResolves(t *testing.T) {
	h := newHarness(t, nil)
	svc := exposed("ext", nil)
	svc.Spec.Type, svc.Spec.ExternalName = corev1.ServiceTypeExternalName, "db.example.test"
	h.createService(svc)
	testpoll.Until(t, settle, "proxy objects", func() error { return h.proxyExists("svc", "ext") })
	h.simulateLogin("svc", "ext", "nEXT", h.ns+"-ext.tail1.ts.net", "100.64.0.21")
	h.wantCondition("ext", "False", "ProxyFailed", `spec.externalName "db.example.test" does not resolve`)
	h.dns.add("db.example.test", "192.0.2.10")
	h.wantCondition("ext", "True", "ProxyCreated", "ProxyCreated")
}

// The API server refusing a proxy's StatefulSet (here a ProxyClass
// nodeSelector value no label may have) shows on the Service, whole.
func TestProxyApplyFailureShownOnService(t *testing.T) {
	h := newHarness(t, nil)
	pc := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "tailscale.com/v1alpha1", "kind": "ProxyClass",
		"metadata": map[string]any{"name": "bad-selector"},
		"spec": map[string]any{"statefulSet": map[string]any{"pod": map[string]any{
			"nodeSelector": map[string]any{"pool": "not a label value!"},
		}}},
	}}
	if _, err := h.dyn.Resource(resources.ProxyClasses).Create(h.ctx(), pc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = h.dyn.Resource(resources.ProxyClasses).Delete(h.ctx(), "bad-selector", metav1.DeleteOptions{})
	})
	h.createService(exposed("sel", map[string]string{"tailscale.com/proxy-class": "bad-selector"}))
	h.wantCondition("sel", "False", "ProxyFailed", `failed to provision proxy: apply StatefulSet`)
	h.wantCondition("sel", "False", "ProxyFailed", `not a label value!`)
}
