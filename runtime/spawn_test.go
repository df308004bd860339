package runtime_test

import (
	"context"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/tailplane/tailplane/internal/testpoll"
	"github.com/tailplane/tailplane/runtime"
)

// A daemon runs per object, holds a finalizer, and is stopped before the
// object goes away.
func TestDaemon(t *testing.T) {
	gvr := newCRD(t, false)
	ns := env.Namespace(t)
	var started, stopped atomic.Int32
	op := newOperator(t, testSettings())
	op.Daemon(gvr, "watcher", func(ctx context.Context, ev *runtime.Event) error {
		started.Add(1)
		<-ctx.Done()
		if ev.Latest() != nil { // still there: the finalizer holds it
			stopped.Add(1)
		}
		return nil
	})
	start(t, op)
	create(t, gvr, widget(ns, "w1", nil, nil))
	testpoll.UntilTrue(t, 20*time.Second, "daemon and finalizer", func() bool {
		return started.Load() == 1 && len(get(t, gvr, ns, "w1").GetFinalizers()) == 1
	})
	remove(t, gvr, ns, "w1")
	testpoll.UntilTrue(t, 20*time.Second, "object gone", func() bool { return get(t, gvr, ns, "w1") == nil })
	if stopped.Load() != 1 {
		t.Fatal("daemon was not stopped while the object still existed")
	}
}

// A timer ticks per object and writes its result; an Idle timer waits until
// the object has been left alone (its own status writes do not count).
func TestTimer(t *testing.T) {
	gvr := newCRD(t, false)
	ns := env.Namespace(t)
	var ticks, idleTicks, quietTicks atomic.Int64
	op := newOperator(t, testSettings())
	op.Timer(gvr, "tick", 100*time.Millisecond, func(context.Context, *runtime.Event) (any, error) {
		return ticks.Add(1), nil
	})
	op.Timer(gvr, "idle", 50*time.Millisecond, func(context.Context, *runtime.Event) (any, error) {
		idleTicks.Add(1)
		return nil, nil
	}, runtime.Idle(time.Hour), runtime.InitialDelay(10*time.Millisecond))
	op.Timer(gvr, "quiet", 50*time.Millisecond, func(context.Context, *runtime.Event) (any, error) {
		return quietTicks.Add(1), nil
	}, runtime.Idle(500*time.Millisecond))
	updated := make(chan struct{}, 1)
	op.OnUpdate(gvr, "seen", func(context.Context, *runtime.Event) (any, error) { updated <- struct{}{}; return nil, nil })
	start(t, op)
	create(t, gvr, widget(ns, "w1", nil, nil))
	testpoll.UntilTrue(t, 20*time.Second, "three ticks written", func() bool {
		v, _ := nested(get(t, gvr, ns, "w1"), "status.tick").(int64)
		return v >= 3
	})
	if idleTicks.Load() != 0 {
		t.Fatal("an Idle timer ticked on a fresh object")
	}
	testpoll.UntilTrue(t, 20*time.Second, "idle timer ticks once the object is quiet", func() bool { return quietTicks.Load() > 0 })
	mergePatch(t, gvr, ns, "w1", `{"spec":{"changed":true}}`)
	<-updated // the change has been seen: the idle clock restarted before handlers ran
	before := quietTicks.Load()
	testpoll.AlwaysTrue(t, 300*time.Millisecond, "idle timer pauses after a change", func() bool { return quietTicks.Load() <= before+1 })
	if f := get(t, gvr, ns, "w1").GetFinalizers(); len(f) != 0 {
		t.Fatalf("a timer added finalizers %v", f)
	}
}

// Indexes are complete before any handler runs, and follow changes.
func TestIndex(t *testing.T) {
	gvr := newCRD(t, false)
	ns := env.Namespace(t)
	for _, name := range []string{"a1", "a2", "b1"} {
		create(t, gvr, widget(ns, name, map[string]any{"owner": name[:1]}, nil))
	}
	op := newOperator(t, testSettings())
	op.Index(gvr, "by-owner", func(obj *unstructured.Unstructured) map[string]any {
		owner, _ := nested(obj, "spec.owner").(string)
		return map[string]any{owner: obj.GetName()}
	})
	var sawAll atomic.Int32
	op.OnCreate(gvr, "check", func(_ context.Context, ev *runtime.Event) (any, error) {
		if slices.Equal(ev.Index("by-owner").Get("a"), []any{"a1", "a2"}) && len(ev.Index("by-owner").Get("b")) == 1 {
			sawAll.Add(1)
		}
		return nil, nil
	})
	start(t, op)
	testpoll.UntilTrue(t, 20*time.Second, "every handler saw the full index", func() bool { return sawAll.Load() == 3 })
	remove(t, gvr, ns, "a1")
	testpoll.UntilTrue(t, 20*time.Second, "index follows deletes", func() bool {
		return slices.Equal(op.GetIndex("by-owner").Get("a"), []any{"a2"})
	})
}
