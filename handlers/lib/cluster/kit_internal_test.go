package cluster

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	clienttesting "k8s.io/client-go/testing"
)

func TestAppliedCacheSkipsOnlyIdenticalRecentApplies(t *testing.T) {
	var c appliedCache
	a, b := [32]byte{1}, [32]byte{2}
	c.remember("v1/secrets/tailscale/ts-web-1234-config", a)
	if !c.fresh("v1/secrets/tailscale/ts-web-1234-config", a, time.Minute) || c.fresh("v1/secrets/tailscale/ts-web-1234-config", b, time.Minute) {
		t.Fatal("cache does not tell identical from changed")
	}
	c.forgetProxy("tailscale", "ts-web-1234")
	if c.fresh("v1/secrets/tailscale/ts-web-1234-config", a, time.Minute) {
		t.Fatal("a deleted proxy's objects are still skipped")
	}
}

// An identical apply whose refresh ran out reads the live object and sends
// nothing while it still holds what was applied (the ExternalName re-check
// every few seconds writes nothing); a live object changed or deleted
// behind the operator's back gets the apply again.
func TestUnchangedChildrenAreNotWrittenAgain(t *testing.T) {
	secret := &corev1.Secret{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{Name: "ts-web-config", Namespace: "tailscale", Labels: map[string]string{"app": "web"}},
		Data:       map[string][]byte{"cfg": []byte("{}")}}
	live, err := kruntime.DefaultUnstructuredConverter.ToUnstructured(secret)
	if err != nil {
		t.Fatal(err)
	}
	// What the API server adds: defaults, metadata of its own.
	live["type"] = "Opaque"
	unstructured.SetNestedField(live, "42", "metadata", "resourceVersion")
	dyn := dynamicfake.NewSimpleDynamicClient(kruntime.NewScheme(), &unstructured.Unstructured{Object: live})
	applies := 0
	dyn.PrependReactor("patch", "secrets", func(clienttesting.Action) (bool, kruntime.Object, error) {
		applies++
		return true, &unstructured.Unstructured{Object: live}, nil
	})
	d := &Deps{Dyn: dyn, ApplyRefresh: -1} // every identical apply looks at the live object
	ctx := context.Background()
	apply := func(want int, what string) {
		t.Helper()
		if err := d.Apply(ctx, secret.DeepCopy()); err != nil {
			t.Fatal(err)
		}
		if applies != want {
			t.Fatalf("%s: %d applies, want %d", what, applies, want)
		}
	}
	apply(1, "first apply")
	apply(1, "unchanged, refresh over")
	apply(1, "unchanged again")

	tracker := dyn.Tracker()
	gvr := corev1.SchemeGroupVersion.WithResource("secrets")
	changed := (&unstructured.Unstructured{Object: live}).DeepCopy()
	unstructured.SetNestedStringMap(changed.Object, map[string]string{"app": "edited"}, "metadata", "labels")
	if err := tracker.Update(gvr, changed, "tailscale"); err != nil {
		t.Fatal(err)
	}
	apply(2, "label edited behind the operator's back")

	if err := tracker.Delete(gvr, "tailscale", "ts-web-config"); err != nil {
		t.Fatal(err)
	}
	apply(3, "deleted behind the operator's back")
}

func TestHolds(t *testing.T) {
	for _, tc := range []struct {
		have, want any
		ok         bool
	}{
		{map[string]any{"a": int64(1), "b": "x"}, map[string]any{"a": int64(1)}, true},
		{map[string]any{"a": float64(1)}, map[string]any{"a": int64(1)}, true},
		{map[string]any{"a": int64(2)}, map[string]any{"a": int64(1)}, false},
		{map[string]any{}, map[string]any{"a": map[string]any{}}, true},
		{map[string]any{}, map[string]any{"a": "x"}, false},
		{map[string]any{"l": []any{"a", "b"}}, map[string]any{"l": []any{"a"}}, false},
		{map[string]any{"l": []any{map[string]any{"n": "a", "d": "x"}}}, map[string]any{"l": []any{map[string]any{"n": "a"}}}, true},
	} {
		if got := holds(tc.have, tc.want); got != tc.ok {
			t.Errorf("holds(%v, %v) = %v", tc.have, tc.want, got)
		}
	}
}
