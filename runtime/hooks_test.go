package runtime_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/tailplane/tailplane/internal/testpoll"
	"github.com/tailplane/tailplane/runtime"
)

// Startup hooks run before any handler; a failing one stops Run; cleanup
// hooks run on shutdown.
func TestStartupAndCleanupHooks(t *testing.T) {
	gvr := newCRD(t, false)
	ns := env.Namespace(t)
	var order []string
	var mu sync.Mutex
	note := func(s string) { mu.Lock(); order = append(order, s); mu.Unlock() }
	op := newOperator(t, testSettings())
	op.OnStartup(func(context.Context) error { note("startup"); return nil })
	op.OnCleanup(func(context.Context) error { note("cleanup"); return nil })
	op.OnCreate(gvr, "h", func(context.Context, *runtime.Event) (any, error) { note("handler"); return nil, nil })
	create(t, gvr, widget(ns, "w1", nil, nil))
	r := start(t, op)
	testpoll.UntilTrue(t, 20*time.Second, "handler", func() bool { mu.Lock(); defer mu.Unlock(); return len(order) == 2 })
	r.stop(t)
	mu.Lock()
	defer mu.Unlock()
	if len(order) != 3 || order[0] != "startup" || order[1] != "handler" || order[2] != "cleanup" {
		t.Fatalf("order = %v", order)
	}

	bad := newOperator(t, testSettings())
	bad.OnStartup(func(context.Context) error { return errors.New("no database") })
	bad.OnCreate(gvr, "h", func(context.Context, *runtime.Event) (any, error) { t.Error("handler ran"); return nil, nil })
	if err := bad.Run(context.Background()); err == nil {
		t.Fatal("Run ignored a failing startup hook")
	}
}

// OnEvent sees raw watch events, with no state kept on the object.
func TestOnEvent(t *testing.T) {
	gvr := newCRD(t, false)
	ns := env.Namespace(t)
	var mu sync.Mutex
	var seen []watch.EventType
	op := newOperator(t, testSettings())
	op.OnEvent(gvr, "raw", func(_ context.Context, typ watch.EventType, obj *unstructured.Unstructured) error {
		mu.Lock()
		seen = append(seen, typ)
		mu.Unlock()
		return nil
	})
	start(t, op)
	created := create(t, gvr, widget(ns, "w1", nil, nil))
	mergePatch(t, gvr, ns, "w1", `{"spec":{"x":1}}`)
	remove(t, gvr, ns, "w1")
	testpoll.UntilTrue(t, 20*time.Second, "added, modified, deleted", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(seen) == 3 && seen[0] == watch.Added && seen[1] == watch.Modified && seen[2] == watch.Deleted
	})
	if len(created.GetAnnotations()) != 0 {
		t.Fatal("raw events left state on the object")
	}
}

// Results go to the status subresource when the resource has one, and a
// handler's own patch is merged into the cycle's patch without looking like
// an update.
func TestStatusSubresourceAndHandlerPatch(t *testing.T) {
	gvr := newCRD(t, true)
	ns := env.Namespace(t)
	var updates atomic.Int32
	op := newOperator(t, testSettings())
	op.OnCreate(gvr, "make", func(_ context.Context, ev *runtime.Event) (any, error) {
		ev.Patch.SetAnnotation("example.com/made", "yes")
		return map[string]any{"ready": true}, nil
	})
	op.OnUpdate(gvr, "upd", func(context.Context, *runtime.Event) (any, error) { updates.Add(1); return nil, nil })
	start(t, op)
	create(t, gvr, widget(ns, "w1", nil, nil))
	testpoll.UntilTrue(t, 20*time.Second, "status and annotation", func() bool {
		got := get(t, gvr, ns, "w1")
		return nested(got, "status.make.ready") == true && got.GetAnnotations()["example.com/made"] == "yes"
	})
	testpoll.AlwaysTrue(t, time.Second, "no update cause from own patch", func() bool { return updates.Load() == 0 })
}

// Every runs a job once the operator is ready, then at each interval; a
// failing run is tried again at the next tick without stopping anything,
// and no run starts once Run returned. Bad registrations are refused.
func TestEveryRunsJobsPeriodically(t *testing.T) {
	var runs, failures atomic.Int32
	var readyAtFirst atomic.Bool
	op := newOperator(t, testSettings())
	if err := op.Every("sweep", 100*time.Millisecond, func(context.Context) error {
		if runs.Add(1) == 1 {
			readyAtFirst.Store(op.Ready())
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := op.Every("flaky", 100*time.Millisecond, func(context.Context) error {
		failures.Add(1)
		return errors.New("the other system is down")
	}); err != nil {
		t.Fatal(err)
	}
	r := start(t, op)
	testpoll.UntilTrue(t, 20*time.Second, "three runs of each job", func() bool { return runs.Load() >= 3 && failures.Load() >= 3 })
	if !readyAtFirst.Load() {
		t.Error("the first run came before the informers had synced")
	}
	r.stop(t)
	after := runs.Load()
	testpoll.AlwaysTrue(t, 500*time.Millisecond, "no run after Run returned", func() bool { return runs.Load() == after })

	bad := newOperator(t, testSettings())
	for _, err := range []error{
		bad.Every("not an id!", time.Second, func(context.Context) error { return nil }),
		bad.Every("zero", 0, func(context.Context) error { return nil }),
		bad.Every("nil", time.Second, nil),
	} {
		if err == nil {
			t.Error("a bad job was accepted")
		}
	}
	_ = bad.Every("twice", time.Second, func(context.Context) error { return nil })
	if bad.Every("twice", time.Second, func(context.Context) error { return nil }) == nil {
		t.Error("a job id registered twice was accepted")
	}
}
