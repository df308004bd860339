package runtime_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/tailplane/tailplane/internal/testpoll"
	"github.com/tailplane/tailplane/runtime"
)

var configMapsGVR = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}

// stateConfigMaps returns the state ConfigMaps in ns, by the object they
// belong to.
func stateConfigMaps(t *testing.T, ns string) map[string]*unstructured.Unstructured {
	t.Helper()
	list, err := dyn(t).Resource(configMapsGVR).Namespace(ns).List(context.Background(),
		metav1.ListOptions{LabelSelector: "runtime.tailplane.io/storage=runtime-state"})
	if err != nil {
		t.Fatalf("list state ConfigMaps: %v", err)
	}
	out := map[string]*unstructured.Unstructured{}
	for i := range list.Items {
		out[list.Items[i].GetAnnotations()["runtime.tailplane.io/object"]] = &list.Items[i]
	}
	return out
}

// With ConfigMapStorage nothing but the finalizer is written on the objects:
// the state lives in one ConfigMap per object, survives a restart (resume,
// not create), and is removed when the object stops matching, is deleted,
// or was deleted while no operator ran.
func TestConfigMapStorage(t *testing.T) {
	gvr := newCRD(t, false)
	ns, stateNS := env.Namespace(t), env.Namespace(t)
	var runs counter
	build := func() *runtime.Operator {
		op := newOperator(t, testSettings())
		opts := []runtime.Option{runtime.Label("app", "x"), runtime.Store(&runtime.ConfigMapStorage{Namespace: stateNS})}
		count := func(what string) runtime.HandlerFunc {
			return func(_ context.Context, ev *runtime.Event) (any, error) {
				runs.inc(what + "/" + ev.Object.GetName())
				return nil, nil
			}
		}
		op.OnCreate(gvr, "make", count("create"), opts...)
		op.OnUpdate(gvr, "change", count("update"), opts...)
		op.OnResume(gvr, "again", count("resume"), opts...)
		op.OnDelete(gvr, "clean", count("delete"), opts...)
		return op
	}
	untouched := func(name string) error {
		obj := get(t, gvr, ns, name)
		if obj == nil {
			return fmt.Errorf("%s gone", name)
		}
		if len(obj.GetAnnotations()) > 0 || obj.Object["status"] != nil {
			return fmt.Errorf("%s written: annotations %v, status %v", name, obj.GetAnnotations(), obj.Object["status"])
		}
		return nil
	}
	first := start(t, build())
	create(t, gvr, widget(ns, "w1", map[string]any{"size": int64(1)}, map[string]string{"app": "x"}))
	create(t, gvr, widget(ns, "w2", nil, map[string]string{"app": "x"}))
	testpoll.UntilTrue(t, 20*time.Second, "both handled, state in ConfigMaps", func() bool {
		return runs.get("create/w1") == 1 && runs.get("create/w2") == 1 && len(stateConfigMaps(t, stateNS)) == 2 &&
			len(get(t, gvr, ns, "w1").GetFinalizers()) == 1
	})
	for _, name := range []string{"w1", "w2"} {
		if err := untouched(name); err != nil {
			t.Fatal(err)
		}
	}

	// Down: w2 goes (finalizer removed by hand). Up again: w1 is resumed,
	// not created, and w2's state is swept.
	first.stop(t)
	mergePatch(t, gvr, ns, "w2", `{"metadata":{"finalizers":null}}`)
	remove(t, gvr, ns, "w2")
	start(t, build())
	testpoll.UntilTrue(t, 20*time.Second, "resumed, stale state swept", func() bool {
		return runs.get("resume/w1") == 1 && len(stateConfigMaps(t, stateNS)) == 1
	})
	mergePatch(t, gvr, ns, "w1", `{"spec":{"size":2}}`)
	testpoll.UntilTrue(t, 20*time.Second, "update", func() bool { return runs.get("update/w1") == 1 })
	if runs.get("create/w1") != 1 {
		t.Fatalf("runs = %v: w1 created again", &runs)
	}

	// No longer matching: finalizer and state go; matching again is a create.
	mergePatch(t, gvr, ns, "w1", `{"metadata":{"labels":{"app":null}}}`)
	testpoll.UntilTrue(t, 20*time.Second, "released", func() bool {
		return len(get(t, gvr, ns, "w1").GetFinalizers()) == 0 && len(stateConfigMaps(t, stateNS)) == 0
	})
	mergePatch(t, gvr, ns, "w1", `{"metadata":{"labels":{"app":"x"}}}`)
	testpoll.UntilTrue(t, 20*time.Second, "created again", func() bool {
		return runs.get("create/w1") == 2 && len(stateConfigMaps(t, stateNS)) == 1
	})
	if err := untouched("w1"); err != nil {
		t.Fatal(err)
	}

	remove(t, gvr, ns, "w1")
	testpoll.UntilTrue(t, 20*time.Second, "deleted, state gone", func() bool {
		return get(t, gvr, ns, "w1") == nil && runs.get("delete/w1") == 1 && len(stateConfigMaps(t, stateNS)) == 0
	})
}

// Upgrading from AnnotationStorage to a ConfigMapStorage with Legacy: an
// object handled before is resumed, not created again, and its records move
// from its annotations into its ConfigMap.
func TestConfigMapStorageMigratesAnnotations(t *testing.T) {
	gvr := newCRD(t, false)
	ns, stateNS := env.Namespace(t), env.Namespace(t)
	var runs counter
	build := func(opts ...runtime.Option) *runtime.Operator {
		op := newOperator(t, testSettings())
		opts = append(opts, runtime.Label("app", "x"))
		op.OnCreate(gvr, "make", func(context.Context, *runtime.Event) (any, error) {
			runs.inc("create")
			return nil, nil
		}, opts...)
		op.OnResume(gvr, "again", func(context.Context, *runtime.Event) (any, error) {
			runs.inc("resume")
			return nil, nil
		}, opts...)
		return op
	}
	old := start(t, build())
	create(t, gvr, widget(ns, "w1", nil, map[string]string{"app": "x"}))
	testpoll.UntilTrue(t, 20*time.Second, "handled, state in annotations", func() bool {
		return runs.get("create") == 1 && get(t, gvr, ns, "w1").GetAnnotations()["runtime.tailplane.io/last-handled"] != ""
	})
	old.stop(t)
	// Releases before WithDiff also kept the essence in the record of an
	// object with a resume handler: it is left behind by the move.
	rec := get(t, gvr, ns, "w1").GetAnnotations()["runtime.tailplane.io/last-handled"]
	withEssence, _ := json.Marshal(strings.TrimSuffix(rec, "}") + `,"e":{"metadata":{"labels":{"app":"x"}}}}`)
	mergePatch(t, gvr, ns, "w1", `{"metadata":{"annotations":{"runtime.tailplane.io/last-handled":`+string(withEssence)+`}}}`)

	start(t, build(runtime.Store(&runtime.ConfigMapStorage{Namespace: stateNS, Legacy: "runtime.tailplane.io"})))
	testpoll.UntilTrue(t, 20*time.Second, "resumed, state moved", func() bool {
		cms := stateConfigMaps(t, stateNS)
		return runs.get("resume") == 1 && len(get(t, gvr, ns, "w1").GetAnnotations()) == 0 &&
			len(cms) == 1 && nested(firstOf(cms), "data.last-handled") != nil
	})
	if runs.get("create") != 1 {
		t.Fatalf("runs = %v: created again", &runs)
	}
	if moved := nested(firstOf(stateConfigMaps(t, stateNS)), "data.last-handled").(string); moved != rec {
		t.Fatalf("moved record %s, want %s (the hash, without the essence)", moved, rec)
	}
}

// With an Owner (the operator's Deployment) every state ConfigMap carries
// its owner reference, so that the garbage collector deletes the state with
// the operator: those written later at creation, those an earlier version
// wrote when the operator starts.
func TestConfigMapStorageOwner(t *testing.T) {
	gvr := newCRD(t, false)
	ns, stateNS := env.Namespace(t), env.Namespace(t)
	ownerObj := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "operator", "namespace": stateNS}}}
	ownerObj, err := dyn(t).Resource(configMapsGVR).Namespace(stateNS).Create(context.Background(), ownerObj, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ref := &metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: "operator", UID: ownerObj.GetUID()}
	build := func(owner func(context.Context) (*metav1.OwnerReference, error)) *runtime.Operator {
		op := newOperator(t, testSettings())
		op.OnCreate(gvr, "make", func(context.Context, *runtime.Event) (any, error) { return nil, nil },
			runtime.Label("app", "x"), runtime.Store(&runtime.ConfigMapStorage{Namespace: stateNS, Owner: owner}))
		return op
	}
	owned := func() (n int) {
		for _, cm := range stateConfigMaps(t, stateNS) {
			refs := cm.GetOwnerReferences()
			if len(refs) == 1 && refs[0].UID == ref.UID && refs[0].Kind == "ConfigMap" && refs[0].Name == "operator" {
				n++
			}
		}
		return n
	}

	earlier := start(t, build(nil))
	create(t, gvr, widget(ns, "w1", nil, map[string]string{"app": "x"}))
	testpoll.UntilTrue(t, 20*time.Second, "state written without an owner", func() bool { return len(stateConfigMaps(t, stateNS)) == 1 })
	if owned() != 0 {
		t.Fatal("a ConfigMap got an owner that no Owner named")
	}
	earlier.stop(t)

	start(t, build(func(context.Context) (*metav1.OwnerReference, error) { return ref, nil }))
	testpoll.UntilTrue(t, 20*time.Second, "the earlier ConfigMap given its owner", func() bool { return owned() == 1 })
	create(t, gvr, widget(ns, "w2", nil, map[string]string{"app": "x"}))
	testpoll.UntilTrue(t, 20*time.Second, "a new ConfigMap written with its owner", func() bool {
		return len(stateConfigMaps(t, stateNS)) == 2 && owned() == 2
	})
}

func firstOf(m map[string]*unstructured.Unstructured) *unstructured.Unstructured {
	for _, v := range m {
		return v
	}
	return nil
}

// Two handlers of one resource cannot name different storages.
func TestConflictingStorageRefused(t *testing.T) {
	gvr := schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}
	op := newOperator(t, testSettings())
	fn := func(context.Context, *runtime.Event) (any, error) { return nil, nil }
	op.OnCreate(gvr, "a", fn, runtime.Store(&runtime.ConfigMapStorage{Namespace: "a"}))
	op.OnUpdate(gvr, "b", fn, runtime.Store(&runtime.ConfigMapStorage{Namespace: "b"}))
	if op.Err() == nil {
		t.Fatal("registration with two storages for one resource accepted")
	}
}
