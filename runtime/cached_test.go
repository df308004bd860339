package runtime

import (
	"encoding/json"
	"reflect"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/client-go/tools/cache"
)

func cachedWidget() *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "example.test/v1", "kind": "Widget",
		"metadata": map[string]any{
			"name": "w", "namespace": "ns", "resourceVersion": "42", "uid": "u-1",
			"labels":        map[string]any{"app": "web"},
			"managedFields": []any{map[string]any{"manager": "kubectl", "operation": "Apply"}},
		},
		"spec": map[string]any{
			"replicas": int64(3), "weight": float64(2), "share": 0.25, "huge": 1e21,
			"enabled": true, "nothing": nil, "big": int64(-9007199254740993),
			"text":  "quote \" backslash \\ newline \n tab \t bell \x07 é 世界 \u2028 </script>",
			"ports": []any{int64(80), float64(443), map[string]any{"ratio": float64(-1)}, []any{}, map[string]any{}},
		},
	}}
}

// The cache keeps what a handler reads, types included: integers stay
// int64, and whole-numbered floats stay float64 (JSON would make them 1).
func TestMemoryCachedObjectKeepsTheObject(t *testing.T) {
	in := cachedWidget()
	stored, err := compact(in.DeepCopy())
	if err != nil {
		t.Fatal(err)
	}
	out := asUnstructured(stored)
	want := cachedWidget()
	unstructured.RemoveNestedField(want.Object, "metadata", "managedFields")
	if !reflect.DeepEqual(out.Object, want.Object) {
		t.Fatalf("decoded\n%#v\nwant\n%#v", out.Object, want.Object)
	}
	if f, _, _ := unstructured.NestedFieldNoCopy(out.Object, "spec", "weight"); reflect.TypeOf(f).Kind() != reflect.Float64 {
		t.Errorf("spec.weight is %T, want float64", f)
	}
}

// client-go's store reads namespace, name and resourceVersion through
// meta.Accessor; the runtime reads the key without decoding.
func TestMemoryCachedObjectServesTheStore(t *testing.T) {
	stored, err := compact(cachedWidget())
	if err != nil {
		t.Fatal(err)
	}
	key, err := cache.MetaNamespaceKeyFunc(stored)
	if err != nil || key != "ns/w" {
		t.Fatalf("key %q, %v; want ns/w", key, err)
	}
	if m, ok := stored.(metav1.ObjectMetaAccessor); !ok || m.GetObjectMeta().GetResourceVersion() != "42" {
		t.Fatalf("resourceVersion not served: %#v", stored)
	}
	tomb := cache.DeletedFinalStateUnknown{Key: "ns/w", Obj: stored}
	if ns, name, ok := cachedKey(tomb); !ok || ns != "ns" || name != "w" {
		t.Fatalf("cachedKey of a tombstone: %q %q %v", ns, name, ok)
	}
	if u := asUnstructured(tomb); u == nil || u.GetName() != "w" {
		t.Fatalf("asUnstructured of a tombstone: %v", u)
	}
	if asUnstructured("not an object") != nil {
		t.Fatal("asUnstructured of a string is not nil")
	}
}

// Every read is a fresh copy: a handler that modifies its object leaves
// the cache as the API server sent it.
func TestMemoryCachedObjectReadsAreCopies(t *testing.T) {
	stored, err := compact(cachedWidget())
	if err != nil {
		t.Fatal(err)
	}
	first := asUnstructured(stored)
	first.SetLabels(map[string]string{"app": "changed"})
	if got := asUnstructured(stored).GetLabels()["app"]; got != "web" {
		t.Fatalf("the cache changed with a handler's copy: app=%q", got)
	}
}

// Invalid UTF-8 is written as U+FFFD, as encoding/json writes it; nothing
// decoded from the API server has any, but the JSON must stay valid.
func TestMemoryCachedObjectInvalidUTF8(t *testing.T) {
	raw, err := appendJSON(nil, map[string]any{"s": "a\xffb"})
	if err != nil {
		t.Fatal(err)
	}
	want, _ := json.Marshal(map[string]any{"s": "a\xffb"})
	if string(raw) != string(want) {
		t.Fatalf("got %s, want %s", raw, want)
	}
}

// Whatever the API server sends decodes the same after the cache's round
// trip (go test -fuzz=FuzzMemoryCachedJSON ./runtime/ explores further).
func FuzzMemoryCachedJSON(f *testing.F) {
	for _, seed := range []string{
		`{"a":1,"b":1.0,"c":-0.5,"d":1e300,"e":"x\u0000y","f":[true,false,null,{}],"g":{"h":[[]]}}`,
		`{"metadata":{"name":"n","annotations":{"k":"{\"h\":\"26517d35\"}"}},"spec":{"x":9223372036854775807}}`,
		`{"s":"\ud83d\ude00 \u2028 <>&","n":-0,"m":0.000001,"l":123456789012345678901234567890}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		var first unstructured.Unstructured
		if err := first.UnmarshalJSON(append([]byte(`{"apiVersion":"v1","kind":"K","x":`), append(in, '}')...)); err != nil {
			return // not an object the API server would send
		}
		raw, err := appendJSON(nil, first.Object)
		if err != nil {
			t.Fatalf("appendJSON: %v", err)
		}
		second, err := decodeJSONObject(raw)
		if err != nil {
			t.Fatalf("the cache's JSON does not decode: %v\n%s", err, raw)
		}
		if !reflect.DeepEqual(first.Object, second) {
			t.Fatalf("round trip changed the object:\n%#v\n%#v", first.Object, second)
		}
	})
}

// The cache's decoder gives what apimachinery's gives for any JSON object
// it accepts (go test -fuzz=FuzzMemoryCachedDecode ./runtime/ explores
// further).
func FuzzMemoryCachedDecode(f *testing.F) {
	for _, seed := range []string{
		`{"a":1,"b":1.0,"c":-0.5,"d":1e300,"e":"x\u0000y","f":[true,false,null,{}],"g":{"h":[[]]}}`,
		`{"s":"\ud83d\ude00 \ud83d \udc00x \u2028 \/ \b\f\n\r\t","n":-0,"m":0.000001,"l":123456789012345678901234567890}`,
		` { "k" : [ 1 , -2 , 3.5e-3 , 9223372036854775807 , -9223372036854775808 , 9223372036854775808 ] } `,
		"{\"bad utf8\":\"a\xffb\xc3\"}",
		`{"dup":1,"dup":2}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		var want map[string]any
		if err := utiljson.Unmarshal(in, &want); err != nil || want == nil {
			return // not an object apimachinery decodes
		}
		got, err := decodeJSONObject(in)
		if err != nil {
			t.Fatalf("apimachinery decodes %q, the cache's decoder fails: %v", in, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("decoded %q differently:\n%#v\napimachinery:\n%#v", in, got, want)
		}
	})
}
