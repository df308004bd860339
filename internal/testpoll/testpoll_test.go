package testpoll_test

import (
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tailplane/tailplane/internal/testpoll"
)

// recorder catches Fatalf instead of failing the test: it records the
// message and unwinds with a panic that run recovers, as t.Fatalf would end
// the goroutine.
type recorder struct {
	testing.TB
	failed string
}

func (r *recorder) Helper() {}

func (r *recorder) Fatalf(format string, args ...any) {
	if r.failed == "" {
		r.failed = fmt.Sprintf(format, args...)
	}
	panic(r)
}

// run calls fn, recovering the recorder's Fatalf.
func run(r *recorder, fn func()) {
	defer func() {
		if p := recover(); p != nil && p != any(r) {
			panic(p)
		}
	}()
	fn()
}

func TestUntilReturnsOnceTheCheckPasses(t *testing.T) {
	var calls atomic.Int32
	r := &recorder{TB: t}
	run(r, func() {
		testpoll.Until(r, 5*time.Second, "third call", func() error {
			if calls.Add(1) < 3 {
				return errors.New("not yet")
			}
			return nil
		})
	})
	if r.failed != "" || calls.Load() != 3 {
		t.Fatalf("failed=%q calls=%d, want success on the third call", r.failed, calls.Load())
	}
}

func TestUntilFailsWithTheLastError(t *testing.T) {
	r := &recorder{TB: t}
	start := time.Now()
	run(r, func() {
		testpoll.Until(r, 50*time.Millisecond, "the impossible", func() error { return errors.New("still broken") })
	})
	if !strings.Contains(r.failed, "the impossible") || !strings.Contains(r.failed, "still broken") {
		t.Fatalf("failure %q names neither the wait nor the last error", r.failed)
	}
	if time.Since(start) < 50*time.Millisecond {
		t.Fatalf("gave up after %s, before the timeout", time.Since(start))
	}
}

func TestAlwaysFailsAsSoonAsTheConditionBreaks(t *testing.T) {
	var calls atomic.Int32
	r := &recorder{TB: t}
	run(r, func() {
		testpoll.AlwaysTrue(r, 10*time.Second, "steady", func() bool { return calls.Add(1) < 3 })
	})
	if !strings.Contains(r.failed, "steady stopped holding") || calls.Load() != 3 {
		t.Fatalf("failed=%q calls=%d, want a failure on the third call", r.failed, calls.Load())
	}
	ok := &recorder{TB: t}
	run(ok, func() { testpoll.AlwaysTrue(ok, 30*time.Millisecond, "steady", func() bool { return true }) })
	if ok.failed != "" {
		t.Fatalf("a condition that held failed: %s", ok.failed)
	}
}
