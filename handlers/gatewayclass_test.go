package handlers_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	"github.com/tailplane/tailplane/handlers/gatewayclass"
	"github.com/tailplane/tailplane/handlers/lib/resources"
	"github.com/tailplane/tailplane/handlers/lib/settings"
	"github.com/tailplane/tailplane/internal/testenv"
	"github.com/tailplane/tailplane/internal/testpoll"
)

// gatewayAPICRDs are the Gateway API CRDs the chart installs.
func gatewayAPICRDs(t *testing.T) []*unstructured.Unstructured {
	t.Helper()
	names, err := filepath.Glob("../deploy/chart/tailplane-operator/files/gateway-api/*.yaml")
	if err != nil || len(names) == 0 {
		t.Fatalf("the chart's Gateway API CRDs: %v", err)
	}
	var out []*unstructured.Unstructured
	for _, name := range names {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(b, &u.Object); err != nil {
			t.Fatal(err)
		}
		out = append(out, u)
	}
	return out
}

// removeGatewayAPI deletes the Gateway API CRDs and waits until the API
// server no longer serves the group.
func removeGatewayAPI(t *testing.T, dyn dynamic.Interface, crds []*unstructured.Unstructured) {
	t.Helper()
	ctx := context.Background()
	// A CRD deleted while its storage still initializes stays Terminating
	// ("could not list instances: storage is (re)initializing") for the
	// API server's retry backoff: list each present one first.
	for _, crd := range crds {
		if _, err := dyn.Resource(testenv.CRDResource).Get(ctx, crd.GetName(), metav1.GetOptions{}); apierrors.IsNotFound(err) {
			continue
		}
		group, _, _ := unstructured.NestedString(crd.Object, "spec", "group")
		plural, _, _ := unstructured.NestedString(crd.Object, "spec", "names", "plural")
		versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
		gvr := schema.GroupVersionResource{Group: group, Version: fmt.Sprint(versions[0].(map[string]any)["name"]), Resource: plural}
		testpoll.Until(t, settle, gvr.String()+" listed", func() error {
			_, err := dyn.Resource(gvr).List(ctx, metav1.ListOptions{Limit: 1})
			return err
		})
	}
	for _, crd := range crds {
		if err := dyn.Resource(testenv.CRDResource).Delete(ctx, crd.GetName(), metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
	}
	testpoll.Until(t, settle, "Gateway API CRDs gone", func() error {
		for _, crd := range crds {
			if cur, err := dyn.Resource(testenv.CRDResource).Get(ctx, crd.GetName(), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				var conds any
				if cur != nil {
					conds, _, _ = unstructured.NestedSlice(cur.Object, "status", "conditions")
				}
				return fmt.Errorf("%s still there: %v %v", crd.GetName(), err, conds)
			}
		}
		return nil
	})
}

func (h *harness) gatewayClassConditions(name string) (map[string]metav1.Condition, *unstructured.Unstructured, error) {
	gc, err := h.dyn.Resource(resources.GatewayClasses).Get(h.ctx(), name, metav1.GetOptions{})
	if err != nil {
		return nil, nil, err
	}
	raw, _, _ := unstructured.NestedSlice(gc.Object, "status", "conditions")
	out := map[string]metav1.Condition{}
	for _, c := range raw {
		m := c.(map[string]any)
		gen, _ := m["observedGeneration"].(int64)
		out[fmt.Sprint(m["type"])] = metav1.Condition{Type: fmt.Sprint(m["type"]), Status: metav1.ConditionStatus(fmt.Sprint(m["status"])),
			Reason: fmt.Sprint(m["reason"]), ObservedGeneration: gen}
	}
	return out, gc, nil
}

// accepted checks that GatewayClass name is Accepted and SupportedVersion
// for its generation, with status.supportedFeatures the features the
// operator serves (gatewayclass.SupportedFeatures, in its order).
func (h *harness) accepted(name string) error {
	conds, gc, err := h.gatewayClassConditions(name)
	if err != nil {
		return err
	}
	for typ, reason := range map[string]string{"Accepted": "Accepted", "SupportedVersion": "SupportedVersion"} {
		c, ok := conds[typ]
		if !ok || c.Status != metav1.ConditionTrue || c.Reason != reason || c.ObservedGeneration != gc.GetGeneration() {
			return fmt.Errorf("%s: %+v (generation %d)", typ, c, gc.GetGeneration())
		}
	}
	features, ok, _ := unstructured.NestedSlice(gc.Object, "status", "supportedFeatures")
	var want []any
	for _, f := range gatewayclass.SupportedFeatures() {
		want = append(want, map[string]any{"name": string(f.Name)})
	}
	if !ok || len(want) == 0 || !reflect.DeepEqual(features, want) {
		return fmt.Errorf("supportedFeatures %v (present %v), want %v", features, ok, want)
	}
	return nil
}

// Without the Gateway API the operator starts and serves everything else;
// with it (the chart's CRDs), it creates its GatewayClass and accepts it and
// every other class of its controller, for each generation, and never
// touches a class of another controller.
func TestGatewayClass(t *testing.T) {
	crds := gatewayAPICRDs(t)
	dyn := dynamic.NewForConfigOrDie(env.Config(t))
	removeGatewayAPI(t, dyn, crds)
	t.Cleanup(func() { removeGatewayAPI(t, dyn, crds) })

	const ours = "tailscale-gw-test"
	h := newHarness(t, func(s *settings.Settings) { s.GatewayClassName = ours })
	h.createProxyClass("gw-absent", "tailplane-proxy:test")
	testpoll.Until(t, settle, "ProxyClassReady without the Gateway API", func() error {
		if st, msg := h.proxyClassReady("gw-absent"); st != "True" {
			return fmt.Errorf("%s %s", st, msg)
		}
		return nil
	})

	if err := testenv.InstallCRDs(h.ctx(), h.dyn, crds...); err != nil {
		t.Fatal(err)
	}
	testpoll.Until(t, settle, "the Gateway API in discovery", func() error {
		_, err := h.kube.Discovery().ServerResourcesForGroupVersion("gateway.networking.k8s.io/v1")
		return err
	})
	h.restart()
	t.Cleanup(func() {
		for _, name := range []string{ours, "gw-second", "gw-other"} {
			_ = h.dyn.Resource(resources.GatewayClasses).Delete(context.Background(), name, metav1.DeleteOptions{})
		}
	})
	testpoll.Until(t, settle, "the operator's GatewayClass accepted", func() error { return h.accepted(ours) })

	other := gatewayclass.ClassObject("gw-other")
	other.Object["spec"] = map[string]any{"controllerName": "example.com/gateway-controller"}
	if _, err := h.dyn.Resource(resources.GatewayClasses).Create(h.ctx(), other, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.dyn.Resource(resources.GatewayClasses).Create(h.ctx(), gatewayclass.ClassObject("gw-second"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testpoll.Until(t, settle, "a second class of ours accepted", func() error { return h.accepted("gw-second") })

	// A new generation is accepted again.
	if _, err := h.dyn.Resource(resources.GatewayClasses).Patch(h.ctx(), "gw-second", types.MergePatchType,
		[]byte(`{"spec":{"description":"second"}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	testpoll.Until(t, settle, "generation 2 accepted", func() error {
		if err := h.accepted("gw-second"); err != nil {
			return err
		}
		if _, gc, _ := h.gatewayClassConditions("gw-second"); gc.GetGeneration() < 2 {
			return fmt.Errorf("generation %d", gc.GetGeneration())
		}
		return nil
	})

	// The other controller's class keeps what the API server defaulted.
	testpoll.Always(t, 2*time.Second, "the other controller's class untouched", func() error {
		conds, gc, err := h.gatewayClassConditions("gw-other")
		if err != nil {
			return err
		}
		if len(conds) != 1 || conds["Accepted"].Reason != "Pending" {
			return fmt.Errorf("conditions %v", conds)
		}
		if _, ok, _ := unstructured.NestedSlice(gc.Object, "status", "supportedFeatures"); ok {
			return fmt.Errorf("supportedFeatures set")
		}
		if len(gc.GetAnnotations()) != 0 || len(gc.GetFinalizers()) != 0 {
			return fmt.Errorf("metadata written: %v %v", gc.GetAnnotations(), gc.GetFinalizers())
		}
		return nil
	})
}
