package gatewayclass_test

import (
	"k8s.io/apimachinery/pkg/util/sets"
	"reflect"
	"sigs.k8s.io/gateway-api/pkg/features"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/tailplane/tailplane/handlers/gatewayclass"
)

func class(controller string, gen int64, conds ...metav1.Condition) *gatewayv1.GatewayClass {
	return &gatewayv1.GatewayClass{
		ObjectMeta: metav1.ObjectMeta{Name: "tailscale", Generation: gen},
		Spec:       gatewayv1.GatewayClassSpec{ControllerName: gatewayv1.GatewayController(controller)},
		Status:     gatewayv1.GatewayClassStatus{Conditions: conds},
	}
}

func TestStatus(t *testing.T) {
	// What the API server defaults a new class's status to.
	pending := metav1.Condition{Type: "Accepted", Status: metav1.ConditionUnknown, Reason: "Pending", Message: "Waiting for controller"}
	other := metav1.Condition{Type: "example.com/Audited", Status: metav1.ConditionTrue, Reason: "Audited", ObservedGeneration: 1}
	gc := class("tailplane.dev/gateway-controller", 3, pending, other)
	if !gatewayclass.IsOurs(gc) || gatewayclass.IsOurs(class("example.com/gateway", 1)) {
		t.Fatal("IsOurs")
	}

	st, ok := gatewayclass.Status(gc, "v1.6.3")
	if !ok {
		t.Fatal("not ok")
	}
	acc := meta.FindStatusCondition(st.Conditions, "Accepted")
	if acc == nil || acc.Status != metav1.ConditionTrue || acc.Reason != "Accepted" || acc.ObservedGeneration != 3 {
		t.Errorf("Accepted %+v", acc)
	}
	ver := meta.FindStatusCondition(st.Conditions, "SupportedVersion")
	if ver == nil || ver.Status != metav1.ConditionTrue || ver.Reason != "SupportedVersion" || ver.ObservedGeneration != 3 {
		t.Errorf("SupportedVersion %+v", ver)
	}
	if o := meta.FindStatusCondition(st.Conditions, "example.com/Audited"); o == nil || *o != other {
		t.Errorf("another controller's condition changed: %+v", o)
	}
	if !reflect.DeepEqual(st.SupportedFeatures, gatewayclass.SupportedFeatures()) {
		t.Errorf("supportedFeatures %v, want %v", st.SupportedFeatures, gatewayclass.SupportedFeatures())
	}
	if len(gc.Status.Conditions) != 2 || gc.Status.Conditions[0] != pending {
		t.Error("Status modified the class")
	}

	// Another patch release of the same minor is supported; another minor,
	// or none, is not, while the class stays accepted (best effort).
	for bundle, want := range map[string]metav1.ConditionStatus{
		"v1.6.0": metav1.ConditionTrue, "v1.6.9": metav1.ConditionTrue,
		"v1.7.0": metav1.ConditionFalse, "v1.5.1": metav1.ConditionFalse, "": metav1.ConditionFalse, "v1.6": metav1.ConditionFalse,
	} {
		st, _ := gatewayclass.Status(gc, bundle)
		ver := meta.FindStatusCondition(st.Conditions, "SupportedVersion")
		if ver.Status != want || (want == metav1.ConditionFalse) != (ver.Reason == "UnsupportedVersion") {
			t.Errorf("bundle %q: SupportedVersion %+v", bundle, ver)
		}
		if want == metav1.ConditionFalse && !strings.Contains(ver.Message, "v1.6.x") {
			t.Errorf("bundle %q: message %q", bundle, ver.Message)
		}
		if acc := meta.FindStatusCondition(st.Conditions, "Accepted"); acc.Status != metav1.ConditionTrue {
			t.Errorf("bundle %q: Accepted %+v", bundle, acc)
		}
	}

	// Written for a newer generation than this copy: no update.
	newer := metav1.Condition{Type: "Accepted", Status: metav1.ConditionTrue, Reason: "Accepted", ObservedGeneration: 4}
	if _, ok := gatewayclass.Status(class("tailplane.dev/gateway-controller", 3, newer), "v1.6.3"); ok {
		t.Error("a stale copy was updated")
	}

	// The transition time holds while the status does.
	again, _ := gatewayclass.Status(&gatewayv1.GatewayClass{ObjectMeta: gc.ObjectMeta, Spec: gc.Spec, Status: st}, "v1.6.3")
	if a := meta.FindStatusCondition(again.Conditions, "Accepted"); a.LastTransitionTime != acc.LastTransitionTime {
		t.Error("Accepted's transition time moved")
	}
}

func TestClassObject(t *testing.T) {
	o := gatewayclass.ClassObject("tailscale")
	if o.GetAPIVersion() != "gateway.networking.k8s.io/v1" || o.GetKind() != "GatewayClass" || o.GetName() != "tailscale" ||
		o.Object["spec"].(map[string]any)["controllerName"] != "tailplane.dev/gateway-controller" {
		t.Errorf("%v", o.Object)
	}
}

// The class claims the core features of the three profiles it runs, each
// name a feature the Gateway API defines, once, sorted by name as the API
// requires. Which extended ones it claims is proven by the conformance run
// (kind-e2e/gatewayconformance claims exactly this list).
func TestSupportedFeatures(t *testing.T) {
	var got []string
	for _, f := range gatewayclass.SupportedFeatures() {
		got = append(got, string(f.Name))
		if features.GetFeature(features.FeatureName(f.Name)).Name == "" {
			t.Errorf("%s is not a Gateway API feature", f.Name)
		}
	}
	if !slices.IsSorted(got) || len(slices.Compact(slices.Clone(got))) != len(got) {
		t.Errorf("supportedFeatures %v are not sorted by name, each once", got)
	}
	for _, core := range []sets.Set[features.Feature]{features.GatewayCoreFeatures, features.HTTPRouteCoreFeatures, features.GRPCRouteCoreFeatures, features.TLSRouteCoreFeatures, features.ReferenceGrantCoreFeatures} {
		for _, f := range core.UnsortedList() {
			if !slices.Contains(got, string(f.Name)) {
				t.Errorf("the core feature %s is not claimed", f.Name)
			}
		}
	}
}
