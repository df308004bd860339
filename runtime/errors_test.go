package runtime_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tailplane/tailplane/internal/testpoll"
	"github.com/tailplane/tailplane/runtime"
)

// Temporary errors are retried after their delay, then the result is written.
func TestTemporaryRetried(t *testing.T) {
	gvr := newCRD(t, false)
	ns := env.Namespace(t)
	var attempts atomic.Int32
	var retries []int
	op := newOperator(t, testSettings())
	op.OnCreate(gvr, "flaky", func(_ context.Context, ev *runtime.Event) (any, error) {
		retries = append(retries, ev.Retry)
		if attempts.Add(1) < 3 {
			return nil, runtime.Temporary(errors.New("not yet"), 100*time.Millisecond)
		}
		return "done", nil
	})
	start(t, op)
	create(t, gvr, widget(ns, "w1", nil, nil))
	testpoll.UntilTrue(t, 20*time.Second, "result after retries", func() bool { return nested(get(t, gvr, ns, "w1"), "status.flaky") == "done" })
	if attempts.Load() != 3 || retries[2] != 2 {
		t.Fatalf("attempts = %d, retries seen %v; want 3 attempts, Retry 0,1,2", attempts.Load(), retries)
	}
	if ann := get(t, gvr, ns, "w1").GetAnnotations(); ann["runtime.tailplane.io/flaky"] != "" {
		t.Fatalf("progress not purged after the cycle: %v", ann)
	}
}

// Permanent errors stop the handler; the other handlers of the cycle still run.
func TestPermanentStops(t *testing.T) {
	gvr := newCRD(t, false)
	ns := env.Namespace(t)
	var bad, good atomic.Int32
	op := newOperator(t, testSettings())
	op.OnCreate(gvr, "bad", func(context.Context, *runtime.Event) (any, error) {
		bad.Add(1)
		return nil, runtime.Permanent(errors.New("cannot"))
	})
	op.OnCreate(gvr, "good", func(context.Context, *runtime.Event) (any, error) { good.Add(1); return "ok", nil })
	start(t, op)
	create(t, gvr, widget(ns, "w1", nil, nil))
	testpoll.UntilTrue(t, 20*time.Second, "cycle done", func() bool { return nested(get(t, gvr, ns, "w1"), "status.good") == "ok" })
	testpoll.AlwaysTrue(t, time.Second, "bad ran once", func() bool { return bad.Load() == 1 && good.Load() == 1 })
}

// Retries caps attempts of plain errors (retried with backoff in between),
// and Timeout fails a handler that keeps failing for too long.
func TestRetriesAndTimeout(t *testing.T) {
	gvr := newCRD(t, false)
	ns := env.Namespace(t)
	var capped, slow atomic.Int32
	var gaps []time.Duration
	var last time.Time
	op := newOperator(t, testSettings())
	op.OnCreate(gvr, "capped", func(context.Context, *runtime.Event) (any, error) {
		if !last.IsZero() {
			gaps = append(gaps, time.Since(last))
		}
		last = time.Now()
		capped.Add(1)
		return nil, errors.New("always")
	}, runtime.Retries(3))
	op.OnCreate(gvr, "slow", func(ctx context.Context, _ *runtime.Event) (any, error) {
		slow.Add(1)
		<-ctx.Done() // the timeout ends the attempt
		return nil, ctx.Err()
	}, runtime.Timeout(300*time.Millisecond))
	op.OnCreate(gvr, "after", func(context.Context, *runtime.Event) (any, error) { return "ran", nil })
	start(t, op)
	create(t, gvr, widget(ns, "w1", nil, nil))
	testpoll.UntilTrue(t, 20*time.Second, "cycle done", func() bool {
		return get(t, gvr, ns, "w1").GetAnnotations()["runtime.tailplane.io/last-handled"] != ""
	})
	if capped.Load() != 3 || slow.Load() != 1 {
		t.Fatalf("capped ran %d times (want 3), slow %d (want 1)", capped.Load(), slow.Load())
	}
	// Exponential backoff: 50ms, then 100ms (MinBackoff 50ms; delays are
	// kept in whole milliseconds, hence the slack).
	if len(gaps) != 2 || gaps[0] < 45*time.Millisecond || gaps[1] < 95*time.Millisecond {
		t.Fatalf("gaps between attempts %v, want >= 50ms then >= 100ms", gaps)
	}
}

// However many retries happen, the state kept on the object stays small.
func TestProgressStaysBounded(t *testing.T) {
	gvr := newCRD(t, false)
	ns := env.Namespace(t)
	var attempts atomic.Int32
	op := newOperator(t, testSettings())
	long := strings.Repeat("x", 10000)
	op.OnCreate(gvr, "noisy", func(context.Context, *runtime.Event) (any, error) {
		attempts.Add(1)
		return nil, runtime.Temporary(errors.New(long), time.Millisecond)
	})
	start(t, op)
	create(t, gvr, widget(ns, "w1", map[string]any{"big": strings.Repeat("y", 5000)}, nil))
	maxSize := 0
	testpoll.UntilTrue(t, 60*time.Second, "100 retries", func() bool {
		size := 0
		for k, v := range get(t, gvr, ns, "w1").GetAnnotations() {
			size += len(k) + len(v)
		}
		maxSize = max(maxSize, size)
		return attempts.Load() >= 100
	})
	if maxSize == 0 || maxSize >= 4096 {
		t.Fatalf("runtime annotations reached %d bytes, want 0 < size < 4 KiB", maxSize)
	}
}
