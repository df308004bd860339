package runtime_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/tailplane/tailplane/internal/testpoll"
	"github.com/tailplane/tailplane/runtime"
)

// Create, update and delete handlers run once per cause, results land in
// status.<id>, and the delete handler holds a finalizer until it is done.
func TestCreateUpdateDelete(t *testing.T) {
	gvr := newCRD(t, false)
	ns := env.Namespace(t)
	var runs counter
	op := newOperator(t, testSettings())
	op.OnCreate(gvr, "make", func(_ context.Context, ev *runtime.Event) (any, error) {
		runs.inc("create")
		return map[string]any{"size": ev.Object.Object["spec"].(map[string]any)["size"]}, nil
	})
	op.OnUpdate(gvr, "change", func(_ context.Context, ev *runtime.Event) (any, error) {
		runs.inc("update")
		return "updated", nil
	})
	op.OnDelete(gvr, "clean", func(_ context.Context, ev *runtime.Event) (any, error) {
		runs.inc("delete")
		return nil, nil
	})
	start(t, op)
	create(t, gvr, widget(ns, "w1", map[string]any{"size": int64(1)}, nil))
	testpoll.UntilTrue(t, 20*time.Second, "create result", func() bool {
		obj := get(t, gvr, ns, "w1")
		return nested(obj, "status.make.size") == int64(1) && len(obj.GetFinalizers()) == 1
	})
	mergePatch(t, gvr, ns, "w1", `{"spec":{"size":2}}`)
	testpoll.UntilTrue(t, 20*time.Second, "update result", func() bool { return nested(get(t, gvr, ns, "w1"), "status.change") == "updated" })
	// A status-only change is not an update.
	mergePatch(t, gvr, ns, "w1", `{"status":{"other":1}}`)
	remove(t, gvr, ns, "w1")
	testpoll.UntilTrue(t, 20*time.Second, "object gone", func() bool { return get(t, gvr, ns, "w1") == nil })
	if runs.get("create") != 1 || runs.get("update") != 1 || runs.get("delete") != 1 {
		t.Fatalf("runs = %v, want one of each", &runs)
	}
}

// The finalizer is added only when a non-optional delete handler exists.
func TestOptionalDeleteAddsNoFinalizer(t *testing.T) {
	gvr := newCRD(t, false)
	ns := env.Namespace(t)
	var runs counter
	op := newOperator(t, testSettings())
	op.OnCreate(gvr, "make", func(context.Context, *runtime.Event) (any, error) { return "ok", nil })
	op.OnDelete(gvr, "bye", func(context.Context, *runtime.Event) (any, error) { runs.inc("delete"); return nil, nil }, runtime.Optional())
	start(t, op)
	create(t, gvr, widget(ns, "w1", nil, nil))
	testpoll.UntilTrue(t, 20*time.Second, "handled", func() bool { return nested(get(t, gvr, ns, "w1"), "status.make") == "ok" })
	if f := get(t, gvr, ns, "w1").GetFinalizers(); len(f) != 0 {
		t.Fatalf("finalizers = %v, want none for an optional delete handler", f)
	}
}

// OnField sees the old and new value of its field and nothing else.
func TestOnField(t *testing.T) {
	gvr := newCRD(t, false)
	ns := env.Namespace(t)
	type change struct{ old, new any }
	got := make(chan change, 10)
	op := newOperator(t, testSettings())
	op.OnField(gvr, "replicas", "spec.replicas", func(_ context.Context, ev *runtime.Event) (any, error) {
		got <- change{ev.Old, ev.New}
		return nil, nil
	})
	start(t, op)
	create(t, gvr, widget(ns, "w1", map[string]any{"replicas": int64(1), "other": "a"}, nil))
	if c := <-got; c.old != nil || c.new != int64(1) {
		t.Fatalf("on create: %+v, want nil -> 1", c)
	}
	testpoll.UntilTrue(t, 20*time.Second, "record written", func() bool {
		return get(t, gvr, ns, "w1").GetAnnotations()["runtime.tailplane.io/last-handled"] != ""
	})
	mergePatch(t, gvr, ns, "w1", `{"spec":{"other":"b"}}`)
	mergePatch(t, gvr, ns, "w1", `{"spec":{"replicas":3}}`)
	select {
	case c := <-got:
		if c.old != float64(1) || c.new != int64(3) {
			t.Fatalf("on change: %+v, want 1 -> 3", c)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("field handler not called on change")
	}
	select {
	case c := <-got:
		t.Fatalf("unexpected extra call %+v", c)
	default:
	}
}

// Resume handlers run once per process for objects an earlier run handled,
// and never for new objects.
func TestOnResume(t *testing.T) {
	gvr := newCRD(t, false)
	ns := env.Namespace(t)
	var runs counter
	build := func() *runtime.Operator {
		op := newOperator(t, testSettings())
		op.OnCreate(gvr, "make", func(context.Context, *runtime.Event) (any, error) { runs.inc("create"); return nil, nil })
		op.OnResume(gvr, "resume", func(context.Context, *runtime.Event) (any, error) { runs.inc("resume"); return nil, nil })
		return op
	}
	first := start(t, build())
	create(t, gvr, widget(ns, "w1", nil, nil))
	testpoll.UntilTrue(t, 20*time.Second, "created", func() bool {
		return get(t, gvr, ns, "w1").GetAnnotations()["runtime.tailplane.io/last-handled"] != ""
	})
	first.stop(t)
	if runs.get("resume") != 0 {
		t.Fatalf("resume ran for a new object")
	}
	start(t, build())
	testpoll.UntilTrue(t, 20*time.Second, "resumed", func() bool { return runs.get("resume") == 1 })
	testpoll.AlwaysTrue(t, time.Second, "one resume, one create", func() bool { return runs.get("resume") == 1 && runs.get("create") == 1 })
}

// Filters pick the handlers, and objects no handler matches are never patched.
func TestFiltersAndStealth(t *testing.T) {
	gvr := newCRD(t, false)
	ns := env.Namespace(t)
	var runs counter
	op := newOperator(t, testSettings())
	h := func(name string) runtime.HandlerFunc {
		return func(context.Context, *runtime.Event) (any, error) { runs.inc(name); return nil, nil }
	}
	op.OnCreate(gvr, "label", h("label"), runtime.Label("app", "web"))
	op.OnCreate(gvr, "present", h("present"), runtime.Annotation("expose", runtime.Present()))
	op.OnCreate(gvr, "absent", h("absent"), runtime.Label("app", runtime.Absent()), runtime.Field("spec.kind", "x"))
	op.OnCreate(gvr, "func", h("func"), runtime.Label("tier", runtime.MatchFunc(func(v string) bool { return len(v) > 3 })))
	op.OnCreate(gvr, "combo", h("combo"), runtime.When(runtime.Or(
		runtime.And(runtime.HasLabel("app", "web"), runtime.Not(runtime.HasField("spec.off", true))),
		runtime.HasAnnotation("force", "yes"))))
	start(t, op)
	create(t, gvr, widget(ns, "web", map[string]any{"off": false}, map[string]string{"app": "web", "tier": "frontend"}))
	create(t, gvr, widget(ns, "kindx", map[string]any{"kind": "x"}, nil))
	stealth := create(t, gvr, widget(ns, "nobody", map[string]any{"kind": "y"}, map[string]string{"app": "db", "tier": "db"}))
	testpoll.UntilTrue(t, 20*time.Second, "handlers", func() bool {
		return runs.get("label") == 1 && runs.get("func") == 1 && runs.get("combo") == 1 && runs.get("absent") == 1
	})
	testpoll.AlwaysTrue(t, time.Second, "non-matching handlers idle", func() bool { return runs.get("present") == 0 })
	if got := get(t, gvr, ns, "nobody"); got.GetResourceVersion() != stealth.GetResourceVersion() {
		t.Fatalf("an object no handler matches was patched: %v", got.GetAnnotations())
	}
}

// Bad registrations are refused with a specific error before anything runs.
func TestBadRegistration(t *testing.T) {
	gvr := newCRD(t, false)
	op := newOperator(t, testSettings())
	nop := func(context.Context, *runtime.Event) (any, error) { return nil, nil }
	op.OnCreate(gvr, "ok", nop)
	op.OnCreate(gvr, "ok", nop)
	op.OnCreate(gvr, "bad id!", nop)
	op.OnField(gvr, "f", "spec..x", nop)
	op.OnCreate(gvr, "sel", nop, runtime.Selector("a in (b"))
	err := op.Run(context.Background())
	if err == nil {
		t.Fatal("Run accepted bad registrations")
	}
	for _, want := range []string{"already registered", `"bad id!"`, "empty segment", "selector"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
	if op.Err() == nil {
		t.Fatal("Err lost the registration errors")
	}
}

// The finalizer is on the object before the first create handler runs, so
// an object deleted right after that handler still gets its delete handler.
func TestFinalizerBeforeCreateHandler(t *testing.T) {
	gvr := newCRD(t, false)
	ns := env.Namespace(t)
	var runs counter
	seen := make(chan []string, 1)
	op := newOperator(t, testSettings())
	op.OnCreate(gvr, "make", func(ctx context.Context, ev *runtime.Event) (any, error) {
		// What the API server holds while the handler runs, not the cache.
		seen <- get(t, gvr, ns, ev.Object.GetName()).GetFinalizers()
		remove(t, gvr, ns, ev.Object.GetName())
		return nil, nil
	})
	op.OnDelete(gvr, "clean", func(context.Context, *runtime.Event) (any, error) { runs.inc("delete"); return nil, nil })
	start(t, op)
	create(t, gvr, widget(ns, "w1", nil, nil))
	if f := <-seen; len(f) != 1 {
		t.Fatalf("finalizers while the create handler ran = %v, want ours", f)
	}
	testpoll.UntilTrue(t, 20*time.Second, "object gone after its delete handler", func() bool { return get(t, gvr, ns, "w1") == nil })
	if runs.get("delete") != 1 {
		t.Fatalf("delete handler ran %d times, want 1", runs.get("delete"))
	}
}
