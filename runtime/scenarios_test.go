package runtime_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/tailplane/tailplane/internal/testpoll"
	"github.com/tailplane/tailplane/runtime"
)

// A restart in the middle of a cycle (while B of A, B, C runs) resumes it: the
// new process finishes B and C and never re-runs A.
func TestRestartMidCycle(t *testing.T) {
	gvr := newCRD(t, false)
	ns := env.Namespace(t)
	var runs counter
	bStarted := make(chan struct{}, 1)
	build := func(blockB bool) *runtime.Operator {
		s := testSettings()
		s.ShutdownTimeout = 300 * time.Millisecond
		op := newOperator(t, s)
		op.OnCreate(gvr, "a", func(context.Context, *runtime.Event) (any, error) { runs.inc("a"); return "a", nil })
		op.OnCreate(gvr, "b", func(ctx context.Context, _ *runtime.Event) (any, error) {
			runs.inc("b")
			if blockB {
				bStarted <- struct{}{}
				<-ctx.Done() // still running when the shutdown bound passes
				return nil, ctx.Err()
			}
			return "b", nil
		})
		op.OnCreate(gvr, "c", func(context.Context, *runtime.Event) (any, error) { runs.inc("c"); return "c", nil })
		return op
	}
	first := start(t, build(true))
	create(t, gvr, widget(ns, "w1", nil, nil))
	<-bStarted
	first.stop(t)
	if got := get(t, gvr, ns, "w1"); nested(got, "status.a") != "a" || got.GetAnnotations()["runtime.tailplane.io/a"] == "" {
		t.Fatalf("A's success was not recorded at shutdown: %v %v", got.GetAnnotations(), got.Object["status"])
	}
	start(t, build(false))
	testpoll.UntilTrue(t, 20*time.Second, "cycle finished", func() bool {
		got := get(t, gvr, ns, "w1")
		return nested(got, "status.c") == "c" && got.GetAnnotations()["runtime.tailplane.io/last-handled"] != ""
	})
	if runs.get("a") != 1 || runs.get("b") != 2 || runs.get("c") != 1 {
		t.Fatalf("runs = %v, want a:1 b:2 c:1", &runs)
	}
}

// A 409 on the final patch (the delete handler changed the object while it
// ran, so the finalizer removal computed from the old copy is refused) is
// retried on a fresh object, and a foreign finalizer is kept when the
// runtime removes its own.
func TestConflictRetriedAndForeignFinalizerKept(t *testing.T) {
	gvr := newCRD(t, false)
	ns := env.Namespace(t)
	var runs counter
	op := newOperator(t, testSettings())
	op.OnCreate(gvr, "grab", func(context.Context, *runtime.Event) (any, error) { runs.inc("create"); return "ok", nil })
	op.OnDelete(gvr, "release", func(context.Context, *runtime.Event) (any, error) {
		runs.inc("delete")
		mergePatch(t, gvr, ns, "w1", `{"metadata":{"annotations":{"example.com/touched":"yes"}}}`)
		return nil, nil
	})
	start(t, op)
	obj := widget(ns, "w1", nil, nil)
	obj.SetFinalizers([]string{"example.com/foreign"})
	create(t, gvr, obj)
	testpoll.UntilTrue(t, 20*time.Second, "both finalizers", func() bool {
		got := get(t, gvr, ns, "w1")
		return nested(got, "status.grab") == "ok" && len(got.GetFinalizers()) == 2
	})
	remove(t, gvr, ns, "w1")
	testpoll.UntilTrue(t, 20*time.Second, "own finalizer removed, foreign kept", func() bool {
		got := get(t, gvr, ns, "w1")
		return slices.Equal(got.GetFinalizers(), []string{"example.com/foreign"})
	})
	if n := counterValue(t, op, "runtime_patches_total", "conflict"); n < 1 {
		t.Fatalf("no conflict was seen (%v); the scenario did not happen", n)
	}
	if runs.get("create") != 1 || runs.get("delete") != 1 {
		t.Fatalf("runs = %v, want one create and one delete", &runs)
	}
	mergePatch(t, gvr, ns, "w1", `{"metadata":{"finalizers":null}}`)
	testpoll.UntilTrue(t, 10*time.Second, "gone", func() bool { return get(t, gvr, ns, "w1") == nil })
}

// Objects deleted while their create handler runs: the runtime neither
// errors in a loop nor re-runs the create handler; each object gets its
// delete handler (the finalizer was placed before the create handler ran),
// then our finalizer goes and only foreign ones stay.
func TestDeletedWhileHandlerRuns(t *testing.T) {
	gvr := newCRD(t, false)
	ns := env.Namespace(t)
	var runs counter
	release := make(chan struct{})
	running := make(chan string, 2)
	op := newOperator(t, testSettings())
	op.OnCreate(gvr, "slow", func(_ context.Context, ev *runtime.Event) (any, error) {
		runs.inc("create-" + ev.Object.GetName())
		running <- ev.Object.GetName()
		<-release
		return "done", nil
	})
	op.OnDelete(gvr, "cleanup", func(_ context.Context, ev *runtime.Event) (any, error) {
		runs.inc("delete-" + ev.Object.GetName())
		return nil, nil
	})
	start(t, op)
	held := widget(ns, "held", nil, nil)
	held.SetFinalizers([]string{"example.com/hold"})
	create(t, gvr, held)
	create(t, gvr, widget(ns, "plain", nil, nil))
	<-running
	<-running
	remove(t, gvr, ns, "held")
	remove(t, gvr, ns, "plain")
	close(release)
	// The failures say what each object has, so that a slow run can be
	// told from a lost delete.
	state := func() string {
		held, plain := get(t, gvr, ns, "held"), get(t, gvr, ns, "plain")
		describe := func(o *unstructured.Unstructured) string {
			if o == nil {
				return "gone"
			}
			return fmt.Sprintf("finalizers %v, deleting %v, annotations %v", o.GetFinalizers(), o.GetDeletionTimestamp() != nil, o.GetAnnotations())
		}
		return fmt.Sprintf("runs %v; held: %s; plain: %s", &runs, describe(held), describe(plain))
	}
	testpoll.Until(t, 20*time.Second, "delete handlers of both objects", func() error {
		if runs.get("delete-held") == 1 && runs.get("delete-plain") == 1 {
			return nil
		}
		return errors.New(state())
	})
	testpoll.Until(t, 20*time.Second, "held object settled, plain object gone", func() error {
		got := get(t, gvr, ns, "held")
		if slices.Equal(got.GetFinalizers(), []string{"example.com/hold"}) &&
			strings.Contains(got.GetAnnotations()["runtime.tailplane.io/cleanup"], `"ok":true`) &&
			get(t, gvr, ns, "plain") == nil {
			return nil
		}
		return errors.New(state())
	})
	testpoll.AlwaysTrue(t, time.Second, "no retries", func() bool {
		return runs.get("create-held") == 1 && runs.get("create-plain") == 1 &&
			runs.get("delete-held") == 1 && runs.get("delete-plain") == 1
	})
	mergePatch(t, gvr, ns, "held", `{"metadata":{"finalizers":null}}`)
}

// A watch that stops delivering (the connection stays open, events vanish)
// is detected by the health check and restarted, and the missed object is
// handled.
func TestStalledWatchRestarted(t *testing.T) {
	gvr := newCRD(t, false)
	ns := env.Namespace(t)
	cfg := env.Config(t)
	fr := &freezer{}
	cfg.Wrap(fr.wrap)
	s := testSettings()
	s.WatchCheckInterval = 200 * time.Millisecond
	s.WatchStallTimeout = time.Second
	op, err := runtime.New(cfg, s)
	if err != nil {
		t.Fatal(err)
	}
	var seen atomic.Int32
	op.OnCreate(gvr, "seen", func(context.Context, *runtime.Event) (any, error) { seen.Add(1); return "seen", nil })
	start(t, op)
	create(t, gvr, widget(ns, "before", nil, nil))
	testpoll.UntilTrue(t, 20*time.Second, "first object", func() bool { return nested(get(t, gvr, ns, "before"), "status.seen") == "seen" })
	if fr.freezeAll() == 0 {
		t.Fatal("no watch stream to freeze")
	}
	create(t, gvr, widget(ns, "during", nil, nil))
	testpoll.UntilTrue(t, 30*time.Second, "object created during the stall", func() bool {
		return nested(get(t, gvr, ns, "during"), "status.seen") == "seen"
	})
	if n := counterValue(t, op, "runtime_watch_restarts_total", ""); n < 1 {
		t.Fatalf("watch restarts = %v", n)
	}
}

// An object no handler matches that carries a finalizer of our name but no
// record of ours belongs to another operator sharing the name (Tailplane
// and the official operator both use tailscale.com/finalizer): it is left
// alone, while it lives and when it is deleted, and the objects we handle
// still get and lose our finalizer.
func TestSharedFinalizerOfAnotherOperatorKept(t *testing.T) {
	gvr := newCRD(t, false)
	ns := env.Namespace(t)
	settings := testSettings()
	settings.Finalizer = "example.com/shared-finalizer"
	op := newOperator(t, settings)
	op.OnCreate(gvr, "grab", func(context.Context, *runtime.Event) (any, error) { return "ok", nil }, runtime.Label("app", "x"))
	op.OnDelete(gvr, "release", func(context.Context, *runtime.Event) (any, error) { return nil, nil }, runtime.Label("app", "x"))
	start(t, op)
	theirs := widget(ns, "theirs", nil, nil)
	theirs.SetFinalizers([]string{settings.Finalizer})
	create(t, gvr, theirs)
	create(t, gvr, widget(ns, "ours", nil, map[string]string{"app": "x"}))
	testpoll.UntilTrue(t, 20*time.Second, "ours handled", func() bool {
		got := get(t, gvr, ns, "ours")
		return nested(got, "status.grab") == "ok" && slices.Equal(got.GetFinalizers(), []string{settings.Finalizer})
	})
	untouched := func() error {
		got := get(t, gvr, ns, "theirs")
		if got == nil || !slices.Equal(got.GetFinalizers(), []string{settings.Finalizer}) || len(got.GetAnnotations()) > 0 || got.Object["status"] != nil {
			return fmt.Errorf("theirs touched: %v", got)
		}
		return nil
	}
	testpoll.Always(t, 3*time.Second, "the other operator's object untouched", untouched)
	remove(t, gvr, ns, "theirs")
	testpoll.Always(t, 3*time.Second, "the other operator's deleted object keeps its finalizer", untouched)
	remove(t, gvr, ns, "ours")
	testpoll.UntilTrue(t, 20*time.Second, "ours released and gone", func() bool { return get(t, gvr, ns, "ours") == nil })
	mergePatch(t, gvr, ns, "theirs", `{"metadata":{"finalizers":null}}`)
	testpoll.UntilTrue(t, 10*time.Second, "theirs gone", func() bool { return get(t, gvr, ns, "theirs") == nil })
}
