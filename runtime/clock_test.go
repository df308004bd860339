package runtime

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/tailplane/tailplane/internal/testpoll"
)

// These tests run the queue, retries and jobs on a fake clock (newMemory):
// time moves only by Step, so each asserts both that nothing happens before
// its delay and that it happens once the delay has passed.

// quiet is how long a test watches for something that must not happen yet.
const quiet = 150 * time.Millisecond

// reached waits until n calls were recorded. The workqueue sets its timer
// for a delayed key on a goroutine of its own, from a time read before the
// timer is made: a Step between the two makes the timer count from the
// stepped time. So if the call does not come, the clock is nudged by 10 ms
// (at most 10 times); the tests check the call's time, which includes any
// nudge, against the expected delay with that slack. The real time this
// waits in all (3 s) is shorter than the delays the tests step, so a delay
// that ran on the real clock fails them.
func (m *memory) reached(c *calls, n int, what string) {
	m.t.Helper()
	for range 10 {
		if waitTrue(300*time.Millisecond, func() bool { return c.count() >= n }) {
			return
		}
		m.clock.Step(10 * time.Millisecond)
	}
	m.t.Fatalf("%s: %d calls, want %d", what, c.count(), n)
}

func waitTrue(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(5 * time.Millisecond)
	}
	return true
}

// notYet asserts that the calls stay at n for a moment of real time.
func (m *memory) notYet(c *calls, n int, what string) {
	m.t.Helper()
	testpoll.AlwaysTrue(m.t, quiet, what, func() bool { return c.count() == n })
}

// within checks that got is want after from, give or take the nudges of
// reached.
func within(t *testing.T, what string, from, got time.Time, want time.Duration) {
	t.Helper()
	if d := got.Sub(from); d < want || d > want+200*time.Millisecond {
		t.Fatalf("%s after %s, want %s", what, d, want)
	}
}

// An Enqueue with a delay runs the object's CauseEnqueue handler once the
// clock has advanced by the delay, and not before.
func TestMemoryEnqueueDelay(t *testing.T) {
	m := newMemory(t, Settings{})
	var c calls
	if err := m.op.On(memGVR, "sync", func(_ context.Context, ev *Event) (any, error) {
		c.add(m.clock.Now(), ev)
		return nil, nil
	}, Causes(CauseCreate, CauseEnqueue)); err != nil {
		t.Fatal(err)
	}
	m.run()
	m.create("w", map[string]any{"size": int64(1)}, nil, nil)
	m.reached(&c, 1, "create")
	if _, ev := c.last(); ev.Cause != CauseCreate {
		t.Fatalf("first call for %s, want create", ev.Cause)
	}
	from := m.clock.Now()
	m.op.Enqueue(memGVR, "default/w", 5*time.Second)
	m.clock.Step(4 * time.Second)
	m.notYet(&c, 1, "no enqueue cycle before the delay")
	m.clock.Step(time.Second)
	m.reached(&c, 2, "enqueue after the delay")
	at, ev := c.last()
	if ev.Cause != CauseEnqueue {
		t.Fatalf("second call for %s, want enqueue", ev.Cause)
	}
	within(t, "enqueued call", from, at, 5*time.Second)
}

// A handler failing with a plain error is retried after MinBackoff, then
// twice as long each time, and never longer than MaxBackoff.
func TestMemoryBackoffGrowsAndIsCapped(t *testing.T) {
	m := newMemory(t, Settings{MinBackoff: time.Second, MaxBackoff: 4 * time.Second})
	var c calls
	if err := m.op.OnCreate(memGVR, "flaky", func(_ context.Context, ev *Event) (any, error) {
		c.add(m.clock.Now(), ev)
		return nil, errors.New("not yet")
	}); err != nil {
		t.Fatal(err)
	}
	m.run()
	m.create("w", nil, nil, nil)
	m.reached(&c, 1, "first attempt")
	for i, want := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 4 * time.Second, 4 * time.Second} {
		from, _ := c.last()
		m.clock.Step(want - 100*time.Millisecond)
		m.notYet(&c, i+1, fmt.Sprintf("no retry %d before %s", i+1, want))
		m.clock.Step(100 * time.Millisecond)
		m.reached(&c, i+2, fmt.Sprintf("retry %d", i+1))
		at, ev := c.last()
		within(t, fmt.Sprintf("retry %d", i+1), from, at, want)
		if ev.Retry != i+1 {
			t.Fatalf("retry %d: Event.Retry %d", i+1, ev.Retry)
		}
	}
}

// A Temporary error's delay replaces the backoff: the retry comes after
// exactly that delay, even one far longer than MaxBackoff.
func TestMemoryTemporaryDelay(t *testing.T) {
	m := newMemory(t, Settings{MinBackoff: time.Second, MaxBackoff: 2 * time.Second})
	var c calls
	if err := m.op.OnCreate(memGVR, "waits", func(_ context.Context, ev *Event) (any, error) {
		c.add(m.clock.Now(), ev)
		if ev.Retry == 0 {
			return nil, Temporary(errors.New("dependency not ready"), 7*time.Second)
		}
		return nil, nil
	}); err != nil {
		t.Fatal(err)
	}
	m.run()
	m.create("w", nil, nil, nil)
	m.reached(&c, 1, "first attempt")
	from, _ := c.last()
	m.clock.Step(2 * time.Second) // MaxBackoff: a plain error would have been retried by now
	m.notYet(&c, 1, "no retry before the Temporary delay")
	m.clock.Step(4900 * time.Millisecond)
	m.notYet(&c, 1, "no retry 100 ms before the Temporary delay")
	m.clock.Step(100 * time.Millisecond)
	m.reached(&c, 2, "retry after the Temporary delay")
	at, _ := c.last()
	within(t, "retry", from, at, 7*time.Second)
	testpoll.UntilTrue(t, 5*time.Second, "success recorded", func() bool {
		rec := m.cached("w").GetAnnotations()[m.op.settings.Prefix+"/"+recordKey]
		return rec != ""
	})
}

// Every runs a job once the informers synced, then once per period of the
// clock.
func TestMemoryEveryPeriod(t *testing.T) {
	m := newMemory(t, Settings{})
	var c calls
	if err := m.op.Every("sweep", 10*time.Minute, func(context.Context) error {
		c.add(m.clock.Now(), nil)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	m.run()
	m.reached(&c, 1, "first run at the start")
	started, _ := c.last()
	for n := 2; n <= 3; n++ {
		m.clock.Step(10*time.Minute - time.Second)
		m.notYet(&c, n-1, "no run before the period")
		m.clock.Step(time.Second)
		m.reached(&c, n, "run after the period")
		at, _ := c.last()
		within(t, "run", started, at, time.Duration(n-1)*10*time.Minute)
	}
}
