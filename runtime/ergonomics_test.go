package runtime_test

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tailplane/tailplane/internal/testpoll"
	"github.com/tailplane/tailplane/runtime"
)

// One registration for create, update and resume: one run per cycle, with
// the cause of the cycle; with WithDiff, update and resume see the old and
// new essence and their diff, also after a restart.
func TestOnSeveralCauses(t *testing.T) {
	gvr := newCRD(t, false)
	ns := env.Namespace(t)
	var mu sync.Mutex
	var seen []*runtime.Event
	build := func() *runtime.Operator {
		op := newOperator(t, testSettings())
		err := op.On(gvr, "sync", func(_ context.Context, ev *runtime.Event) (any, error) {
			mu.Lock()
			defer mu.Unlock()
			seen = append(seen, ev)
			return nil, nil
		}, runtime.Causes(runtime.CauseCreate, runtime.CauseUpdate, runtime.CauseResume), runtime.WithDiff())
		if err != nil {
			t.Fatal(err)
		}
		return op
	}
	events := func() []*runtime.Event { mu.Lock(); defer mu.Unlock(); return append([]*runtime.Event(nil), seen...) }
	first := start(t, build())
	create(t, gvr, widget(ns, "w1", map[string]any{"size": int64(1), "keep": "x"}, map[string]string{"app": "a"}))
	testpoll.UntilTrue(t, 20*time.Second, "create", func() bool { return len(events()) == 1 })
	handled(t, gvr, ns, "w1")
	mergePatch(t, gvr, ns, "w1", `{"spec":{"size":2,"extra":true},"metadata":{"labels":{"app":null}}}`)
	testpoll.UntilTrue(t, 20*time.Second, "update", func() bool { return len(events()) == 2 })
	ev := events()[1]
	if ev.Cause != runtime.CauseUpdate {
		t.Fatalf("second run cause = %s, want update", ev.Cause)
	}
	old, _ := ev.Old.(map[string]any)
	cur, _ := ev.New.(map[string]any)
	if nestedMap(old, "spec", "size") != float64(1) || nestedMap(cur, "spec", "size") != float64(2) || nestedMap(cur, "spec", "keep") != "x" {
		t.Fatalf("old = %v, new = %v", ev.Old, ev.New)
	}
	want := []runtime.DiffItem{
		{Op: runtime.DiffRemove, Path: []string{"metadata", "labels"}, Old: map[string]any{"app": "a"}},
		{Op: runtime.DiffAdd, Path: []string{"spec", "extra"}, New: true},
		{Op: runtime.DiffChange, Path: []string{"spec", "size"}, Old: float64(1), New: float64(2)},
	}
	if !reflect.DeepEqual(ev.Diff, want) {
		t.Fatalf("diff = %+v, want %+v", ev.Diff, want)
	}
	testpoll.UntilTrue(t, 20*time.Second, "record with the new essence", func() bool {
		return strings.Contains(get(t, gvr, ns, "w1").GetAnnotations()["runtime.tailplane.io/last-handled"], `"extra":true`)
	})
	first.stop(t)
	// While the operator is down the object changes: the resume run after
	// the restart sees that change in its diff, in the same single run.
	mergePatch(t, gvr, ns, "w1", `{"spec":{"size":3}}`)
	start(t, build())
	testpoll.UntilTrue(t, 20*time.Second, "one run after the restart", func() bool { return len(events()) == 3 })
	testpoll.AlwaysTrue(t, time.Second, "no second run", func() bool { return len(events()) == 3 })
	ev = events()[2]
	if ev.Cause != runtime.CauseUpdate || len(ev.Diff) != 1 || ev.Diff[0].Old != float64(2) || ev.Diff[0].New != float64(3) {
		t.Fatalf("after restart: cause %s, diff %+v; want one update run 2 -> 3", ev.Cause, ev.Diff)
	}
}

// A resume handler after a restart compares with the essence handled before
// it: unchanged objects give an empty diff.
func TestResumeSeesStoredEssence(t *testing.T) {
	gvr := newCRD(t, false)
	ns := env.Namespace(t)
	got := make(chan *runtime.Event, 4)
	build := func() *runtime.Operator {
		op := newOperator(t, testSettings())
		op.OnResume(gvr, "resume", func(_ context.Context, ev *runtime.Event) (any, error) { got <- ev; return nil, nil }, runtime.WithDiff())
		return op
	}
	first := start(t, build())
	create(t, gvr, widget(ns, "w1", map[string]any{"size": int64(1)}, nil))
	handled(t, gvr, ns, "w1")
	first.stop(t)
	start(t, build())
	select {
	case ev := <-got:
		if ev.Old == nil || !reflect.DeepEqual(ev.Old, ev.New) || len(ev.Diff) != 0 {
			t.Fatalf("resume: old %v new %v diff %v; want the same essence, no diff", ev.Old, ev.New, ev.Diff)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("resume handler did not run")
	}
}

// An essence past MaxEssence is not stored, even for a WithDiff handler:
// the record keeps the hash (an update is still detected) and the handler
// gets Old and Diff nil.
func TestEssenceSizeBound(t *testing.T) {
	gvr := newCRD(t, false)
	ns := env.Namespace(t)
	got := make(chan *runtime.Event, 4)
	op := newOperator(t, testSettings())
	op.OnUpdate(gvr, "change", func(_ context.Context, ev *runtime.Event) (any, error) { got <- ev; return nil, nil }, runtime.WithDiff())
	start(t, op)
	big := strings.Repeat("x", runtime.MaxEssence)
	create(t, gvr, widget(ns, "w1", map[string]any{"blob": big}, nil))
	handled(t, gvr, ns, "w1")
	if rec := get(t, gvr, ns, "w1").GetAnnotations()["runtime.tailplane.io/last-handled"]; len(rec) > 200 {
		t.Fatalf("record of %d bytes stored for an essence past the bound", len(rec))
	}
	mergePatch(t, gvr, ns, "w1", `{"spec":{"size":1}}`)
	select {
	case ev := <-got:
		if ev.Old != nil || ev.Diff != nil || ev.New != nil {
			t.Fatalf("old %T, new %T, diff %v; want all nil past the bound", ev.Old, ev.New, ev.Diff)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("update handler did not run")
	}
}

// A failing timer tick is retried like a handler: on the backoff after a
// plain error and after the delay of a Temporary one, long before the next
// regular tick.
func TestTimerRetriedWithBackoff(t *testing.T) {
	gvr := newCRD(t, false)
	ns := env.Namespace(t)
	const delay = 800 * time.Millisecond
	var seen attempts
	op := newOperator(t, testSettings())
	op.Timer(gvr, "tick", time.Hour, func(_ context.Context, ev *runtime.Event) (any, error) {
		switch seen.add(ev) {
		case 1:
			return nil, errors.New("plain")
		case 2:
			return nil, runtime.Temporary(errors.New("later"), delay)
		}
		return "ticked", nil
	})
	start(t, op)
	create(t, gvr, widget(ns, "w1", nil, nil))
	testpoll.UntilTrue(t, 20*time.Second, "timer result after two retries", func() bool { return nested(get(t, gvr, ns, "w1"), "status.tick") == "ticked" })
	got := seen.list()
	if len(got) != 3 || got[1].retry != 1 || got[2].retry != 2 {
		t.Fatalf("ticks = %+v, want 3 with Retry 0, 1, 2", got)
	}
	if gap := got[2].at.Sub(got[1].at); gap < delay {
		t.Fatalf("retried %s after a Temporary error, want at least %s", gap, delay)
	}
	wantEvent(t, ns, "w1", runtime.ReasonRetry, "plain")
}

// Registration errors come back from the registering call (and still from
// Err and Run).
func TestRegistrationErrorsReturned(t *testing.T) {
	gvr := newCRD(t, false)
	op := newOperator(t, testSettings())
	nop := func(context.Context, *runtime.Event) (any, error) { return nil, nil }
	if err := op.On(gvr, "none", nop); err == nil || !strings.Contains(err.Error(), "Causes") {
		t.Errorf("On without causes: %v", err)
	}
	if err := op.On(gvr, "timer", nop, runtime.Causes(runtime.CauseTimer)); err == nil || !strings.Contains(err.Error(), "cannot be combined") {
		t.Errorf("On with a timer cause: %v", err)
	}
	if err := op.OnCreate(gvr, "neg", nop, runtime.Retries(-1)); err == nil || !strings.Contains(err.Error(), "negative") {
		t.Errorf("negative Retries: %v", err)
	}
	if err := op.OnCreate(gvr, "ok", nop); err != nil {
		t.Fatalf("valid registration: %v", err)
	}
	if err := op.OnUpdate(gvr, "ok", nop); err == nil || !strings.Contains(err.Error(), "already registered") {
		t.Errorf("duplicate id: %v", err)
	}
	if err := op.Run(context.Background()); err == nil || !strings.Contains(err.Error(), "Causes") {
		t.Fatalf("Run: %v", err)
	}
	if err := op.OnCreate(gvr, "late", nop); err == nil || !strings.Contains(err.Error(), "after Run") {
		t.Errorf("registration after Run: %v", err)
	}
}

func nestedMap(m map[string]any, path ...string) any {
	var v any = m
	for _, p := range path {
		mm, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = mm[p]
	}
	return v
}
