package host_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tailplane/tailplane/plugins/host"
	"github.com/tailplane/tailplane/proxy/route"
)

// The watchdog stops a looping guest at about its deadline (not before it,
// not much after), only that instance: calls running on the pool's other
// instance meanwhile are answered normally.
func TestWatchdogStopsOnlyTheOverrunningCall(t *testing.T) {
	e, logs := newEngine(t)
	const deadline = 300 * time.Millisecond
	p := misbehaving(t, e, "watchdog", host.Config{Timeout: deadline, PoolSize: 2, Prewarm: 2, FailurePolicy: host.FailClosed})
	if strings.Contains(logs.String(), "not instrumented") {
		t.Fatalf("the plugin fell back to wazero's deadline: %s", logs.String())
	}
	var wg sync.WaitGroup
	var took time.Duration
	var looped route.Decision
	wg.Add(1)
	go func() {
		defer wg.Done()
		start := time.Now()
		looped, _ = p.Route(context.Background(), request("/loop"), route.Decision{})
		took = time.Since(start)
	}()
	// Both instances are pre-warmed: while the loop runs, the other one
	// serves. Keep calling until the looping call has ended.
	loopDone := make(chan struct{})
	go func() { wg.Wait(); close(loopDone) }()
	served := 0
	for running := true; running; {
		select {
		case <-loopDone:
			running = false
		default:
			d, err := p.Route(context.Background(), request("/"), route.Decision{})
			if err != nil || d.Action != route.Forward || d.SetRequestHeaders.Get("X-Plugin") != "seen" {
				t.Fatalf("a call beside the looping one failed: %+v, %v", d, err)
			}
			served++
		}
	}
	if looped.Action != route.Deny || looped.Status != 503 {
		t.Errorf("looping call's decision = %+v, want a 503", looped)
	}
	if took < deadline {
		t.Errorf("the looping call ended after %v, before its %v deadline", took, deadline)
	}
	// The watchdog looks every deadline/8; allow a loaded CI machine 2 s more.
	if took > deadline+2*time.Second {
		t.Errorf("the looping call took %v; the deadline is %v", took, deadline)
	}
	if served == 0 {
		t.Error("no call was served beside the looping one")
	}
	lbl := map[string]string{"plugin": "watchdog", "reason": "timeout"}
	if got := metric(t, e, "tailplane_plugin_instances_discarded_total", lbl); got != 1 {
		t.Errorf("discarded{reason=timeout} = %v, want 1 (only the looping instance)", got)
	}
	if !strings.Contains(logs.String(), "deadline exceeded") {
		t.Errorf("logs do not say why: %s", logs.String())
	}
	servesNormally(t, p)
}
