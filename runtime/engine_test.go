package runtime_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/tailplane/tailplane/internal/testpoll"
	"github.com/tailplane/tailplane/runtime"
)

// All matching handlers of a cycle end in ONE patch that carries their
// results, their own changes and the runtime's state; the echo of that patch
// causes no further write.
func TestOneMergedPatchPerCycle(t *testing.T) {
	gvr := newCRD(t, false)
	ns := env.Namespace(t)
	op := newOperator(t, testSettings())
	for _, id := range []string{"a", "b", "c"} {
		op.OnCreate(gvr, id, func(_ context.Context, ev *runtime.Event) (any, error) {
			ev.Patch.SetLabel("example.com/"+id, "done")
			return id + "-result", nil
		})
	}
	start(t, op)
	create(t, gvr, widget(ns, "w1", nil, nil))
	testpoll.UntilTrue(t, 20*time.Second, "handled", func() bool {
		got := get(t, gvr, ns, "w1")
		return nested(got, "status.c") == "c-result" && got.GetLabels()["example.com/a"] == "done"
	})
	// The object can be read back a moment before the operator counts the
	// patch it sent; wait for the count, then check it stays at one.
	testpoll.UntilTrue(t, 5*time.Second, "the patch counted", func() bool {
		return counterValue(t, op, "runtime_patches_total", "ok") >= 1
	})
	testpoll.AlwaysTrue(t, time.Second, "exactly one patch", func() bool {
		return counterValue(t, op, "runtime_patches_total", "ok") == 1
	})
}

// The queue never hands one object to two workers, while different objects
// are handled in parallel.
func TestOneKeyOneWorker(t *testing.T) {
	gvr := newCRD(t, false)
	ns := env.Namespace(t)
	var mu sync.Mutex
	inFlight := map[string]int{}
	maxPerKey, maxTotal, total := 0, 0, 0
	slow := func(ctx context.Context, ev *runtime.Event) (any, error) {
		name := ev.Object.GetName()
		mu.Lock()
		inFlight[name]++
		total++
		maxPerKey, maxTotal = max(maxPerKey, inFlight[name]), max(maxTotal, total)
		mu.Unlock()
		select { // hold the worker so that overlaps would show
		case <-ctx.Done():
		case <-time.After(50 * time.Millisecond):
		}
		mu.Lock()
		inFlight[name]--
		total--
		mu.Unlock()
		return nil, nil
	}
	op := newOperator(t, testSettings())
	op.OnCreate(gvr, "create", slow)
	op.OnUpdate(gvr, "update", slow)
	start(t, op)
	for i := range 4 {
		create(t, gvr, widget(ns, fmt.Sprintf("w%d", i), nil, nil))
	}
	for n := range 10 {
		for i := range 4 {
			mergePatch(t, gvr, ns, fmt.Sprintf("w%d", i), fmt.Sprintf(`{"spec":{"n":%d}}`, n))
		}
	}
	testpoll.UntilTrue(t, 30*time.Second, "all updates handled", func() bool {
		for i := range 4 {
			if nested(get(t, gvr, ns, fmt.Sprintf("w%d", i)), "spec.n") != int64(9) {
				return false
			}
			if len(get(t, gvr, ns, fmt.Sprintf("w%d", i)).GetAnnotations()) < 1 {
				return false
			}
		}
		mu.Lock()
		defer mu.Unlock()
		return total == 0
	})
	mu.Lock()
	defer mu.Unlock()
	if maxPerKey != 1 || maxTotal < 2 {
		t.Fatalf("max handlers in flight per object %d (want 1), overall %d (want > 1)", maxPerKey, maxTotal)
	}
}
