package runtime

import (
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// diff reports added, changed and removed fields by path, compares lists
// whole, and under keeps what concerns one field.
func TestDiffAndUnder(t *testing.T) {
	old := map[string]any{"spec": map[string]any{"a": 1.0, "list": []any{1.0, 2.0}, "gone": "x"}, "metadata": map[string]any{}}
	cur := map[string]any{"spec": map[string]any{"a": 2.0, "list": []any{1.0, 2.0, 3.0}, "new": true}, "metadata": map[string]any{}}
	got := diff(nil, old, cur)
	want := []DiffItem{
		{Op: DiffChange, Path: []string{"spec", "a"}, Old: 1.0, New: 2.0},
		{Op: DiffRemove, Path: []string{"spec", "gone"}, Old: "x"},
		{Op: DiffChange, Path: []string{"spec", "list"}, Old: []any{1.0, 2.0}, New: []any{1.0, 2.0, 3.0}},
		{Op: DiffAdd, Path: []string{"spec", "new"}, New: true},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("diff = %+v\nwant %+v", got, want)
	}
	if u := under(got, "spec.list"); len(u) != 1 || u[0].Path[1] != "list" {
		t.Fatalf("under spec.list = %+v", u)
	}
	if u := under(diff(nil, map[string]any{}, cur), "spec.a"); len(u) != 1 || u[0].Op != DiffAdd || len(u[0].Path) != 1 {
		t.Fatalf("a new spec replaces spec.a whole: %+v", u)
	}
	if d := diff(nil, cur, cur); d != nil {
		t.Fatalf("no change, diff %+v", d)
	}
}

// The essence leaves out status, system metadata and the runtime's own
// annotations, and is not kept past MaxEssence.
func TestEssenceContent(t *testing.T) {
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Widget",
		"metadata": map[string]any{"name": "w", "resourceVersion": "7", "labels": map[string]any{"a": "b"},
			"annotations": map[string]any{"p/last-handled": "{}", "user": "u", "kubectl.kubernetes.io/last-applied-configuration": "{}"}},
		"spec":   map[string]any{"x": int64(1)},
		"status": map[string]any{"y": int64(2)},
	}}
	raw, m := encodeEssence("p", obj)
	want := `{"metadata":{"annotations":{"user":"u"},"labels":{"a":"b"}},"spec":{"x":1}}`
	if string(raw) != want || m["spec"].(map[string]any)["x"] != 1.0 {
		t.Fatalf("essence = %s (%v), want %s", raw, m, want)
	}
	obj.Object["spec"] = map[string]any{"blob": strings.Repeat("x", MaxEssence)}
	if raw, m := encodeEssence("p", obj); raw != nil || m != nil {
		t.Fatalf("essence past MaxEssence kept (%d bytes)", len(raw))
	}
}
