package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/charmbracelet/log"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
)

// spawned holds the timers and daemons of one object.
type spawned struct {
	uid        types.UID
	hash       string    // essence hash when last seen, for Idle timers
	lastChange time.Time // when that hash last changed
	tasks      map[string]*task
}

type task struct {
	cancel context.CancelFunc
	done   chan struct{}
}

func (o *Operator) idleFor(k Key) time.Duration {
	o.stateMu.Lock()
	defer o.stateMu.Unlock()
	if sp := o.spawned[k]; sp != nil {
		return o.settings.Clock.Since(sp.lastChange)
	}
	return 0
}

// syncSpawned starts the timers and daemons that match obj and stops those
// that no longer do.
func (o *Operator) syncSpawned(k Key, obj *unstructured.Unstructured, hs []*handler) {
	o.stateMu.Lock()
	defer o.stateMu.Unlock()
	sp := o.spawned[k]
	if sp != nil && sp.uid != obj.GetUID() {
		for _, t := range sp.tasks {
			t.cancel()
		}
		sp = nil
	}
	if sp == nil {
		if len(hs) == 0 {
			delete(o.spawned, k)
			return
		}
		sp = &spawned{uid: obj.GetUID(), lastChange: o.settings.Clock.Now(), tasks: map[string]*task{}}
		o.spawned[k] = sp
	}
	// Idle counts from the last change of the essence, so that status
	// writes (timers' own results included) do not keep an object busy.
	if slices.ContainsFunc(hs, func(h *handler) bool { return h.idle > 0 }) {
		if hash := essenceHash(o.settings.Prefix, obj); hash != sp.hash {
			sp.hash, sp.lastChange = hash, o.settings.Clock.Now()
		}
	}
	want := map[string]bool{}
	for _, h := range hs {
		want[h.id] = true
		if sp.tasks[h.id] == nil {
			sp.tasks[h.id] = o.spawn(k, h)
		}
	}
	for id, t := range sp.tasks {
		if !want[id] {
			t.cancel()
			delete(sp.tasks, id)
		}
	}
}

// stopSpawned cancels an object's timers and daemons; with wait it waits
// (up to DaemonStopTimeout) until they have returned.
func (o *Operator) stopSpawned(k Key, wait bool) {
	o.stateMu.Lock()
	sp := o.spawned[k]
	delete(o.spawned, k)
	o.stateMu.Unlock()
	if sp == nil {
		return
	}
	for _, t := range sp.tasks {
		t.cancel()
	}
	if wait {
		waitTasks(sp.tasks, o.settings.DaemonStopTimeout)
	}
}

// stopAllSpawned is part of shutdown.
func (o *Operator) stopAllSpawned(timeout time.Duration) {
	o.stateMu.Lock()
	all := map[string]*task{}
	for k, sp := range o.spawned {
		for id, t := range sp.tasks {
			t.cancel()
			all[k.String()+"#"+id] = t
		}
	}
	o.spawned = map[Key]*spawned{}
	o.stateMu.Unlock()
	waitTasks(all, timeout)
}

func waitTasks(tasks map[string]*task, timeout time.Duration) {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for _, t := range tasks {
		select {
		case <-t.done:
		case <-deadline.C:
			return
		}
	}
}

func (o *Operator) spawn(k Key, h *handler) *task {
	ctx, cancel := context.WithCancel(o.runCtx())
	t := &task{cancel: cancel, done: make(chan struct{})}
	logger := o.objectLogger(k).With("handler", h.id)
	go func() {
		defer close(t.done)
		if !o.sleep(ctx, h.initialDelay) {
			return
		}
		if h.kind == kindDaemon {
			o.runDaemon(ctx, k, h, logger)
		} else {
			o.runTimer(ctx, k, h)
		}
	}()
	return t
}

func (o *Operator) runDaemon(ctx context.Context, k Key, h *handler, logger *log.Logger) {
	for attempt := 1; ; attempt++ {
		obj := o.lookup(k)
		if obj == nil {
			return
		}
		ev := &Event{Cause: CauseDaemon, HandlerID: h.id, Resource: k.Resource, Object: obj,
			Retry: attempt - 1, Started: o.settings.Clock.Now(), Log: o.objectLogger(k).With("handler", h.id),
			Patch: &Patch{}, op: o, key: k}
		err := callDaemon(ctx, h.daemonFn, ev)
		if err == nil || ctx.Err() != nil {
			return
		}
		delay := o.backoff(h, attempt)
		logger.Warn("daemon failed, restarting it", "err", err, "delay", delay)
		if !o.sleep(ctx, delay) {
			return
		}
	}
}

// runTimer ticks every interval. A failed tick is retried like a handler:
// after a Temporary error's delay, after the backoff (Backoff, or the
// exponential one) for plain errors, at the next regular tick at the latest;
// a Permanent error, or Retries used up, waits for the next regular tick.
func (o *Operator) runTimer(ctx context.Context, k Key, h *handler) {
	failures := 0
	wait := time.Duration(0)
	for n := 0; ; n++ {
		if n > 0 && !o.sleep(ctx, wait) {
			return
		}
		wait = h.interval
		if h.idle > 0 && o.idleFor(k) < h.idle {
			continue
		}
		obj := o.lookup(k)
		if obj == nil {
			return
		}
		logger := o.objectLogger(k).With("handler", h.id)
		ev := &Event{Cause: CauseTimer, HandlerID: h.id, Resource: k.Resource, Object: obj,
			Retry: failures, Started: o.settings.Clock.Now(), Log: logger, Patch: &Patch{}, op: o, key: k}
		start := o.settings.Clock.Now()
		result, err := call(ctx, h.fn, ev)
		o.metrics.handlerDuration.WithLabelValues(k.Resource.String(), h.id).Observe(o.settings.Clock.Since(start).Seconds())
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			failures++
			if retry, delay := o.timerFailed(ev, h, err, failures); retry {
				wait = delay
			} else {
				failures = 0
			}
			continue
		}
		failures = 0
		o.metrics.handlerOutcomes.WithLabelValues(k.Resource.String(), h.id, "success").Inc()
		body := compose(nil, ev.Patch.obj)
		if result != nil {
			body = compose(body, nestResults(o.settings.ResultsPath, map[string]any{h.id: result}))
		}
		if err := o.patchObject(ctx, k, body); err != nil {
			logger.Warn("timer result not written", "err", err)
		}
	}
}

// timerFailed reports a failed tick and returns whether to retry it, and
// after how long.
func (o *Operator) timerFailed(ev *Event, h *handler, err error, failures int) (bool, time.Duration) {
	res := ev.Resource.String()
	var temp *TemporaryError
	var perm *PermanentError
	msg := truncate(err.Error(), maxMessage)
	switch {
	case errors.As(err, &perm), h.retries > 0 && failures >= h.retries:
		o.metrics.handlerOutcomes.WithLabelValues(res, h.id, "permanent").Inc()
		ev.Log.Error("timer failed, next tick as scheduled", "err", err, "attempts", failures)
		o.post(ev.Object, corev1.EventTypeWarning, ReasonFailed, "Timer %q failed: %s", h.id, msg)
		return false, 0
	}
	delay, outcome := min(o.backoff(h, failures), h.interval), "error"
	if errors.As(err, &temp) {
		delay, outcome = temp.Delay, "temporary"
	}
	o.metrics.handlerOutcomes.WithLabelValues(res, h.id, outcome).Inc()
	o.metrics.retries.WithLabelValues(res, h.id).Inc()
	ev.Log.Warn("timer failed, will retry", "retry", failures, "delay", delay, "err", err)
	o.post(ev.Object, corev1.EventTypeWarning, ReasonRetry, "Timer %q failed, retry %d in %s: %s", h.id, failures, delay, msg)
	return true, delay
}

// patchObject writes a merge patch, sending status to the status
// subresource when the resource has one.
func (o *Operator) patchObject(ctx context.Context, k Key, body map[string]any) error {
	ri := o.dyn.Resource(k.Resource).Namespace(k.Namespace)
	if o.hasStatusSubresource(k.Resource) {
		if status, ok := body["status"]; ok {
			delete(body, "status")
			b, _ := json.Marshal(map[string]any{"status": status})
			if _, err := ri.Patch(ctx, k.Name, types.MergePatchType, b, metav1.PatchOptions{}, "status"); err != nil {
				return fmt.Errorf("patch status of %s: %w", k, err)
			}
		}
	}
	if len(body) == 0 {
		return nil
	}
	b, err := json.Marshal(body)
	if err != nil {
		return fmt.Errorf("encode patch of %s: %w", k, err)
	}
	if _, err := ri.Patch(ctx, k.Name, types.MergePatchType, b, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("patch %s: %w", k, err)
	}
	return nil
}

func callDaemon(ctx context.Context, fn DaemonFunc, ev *Event) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("daemon panicked: %v", r)
		}
	}()
	return fn(ctx, ev)
}

// sleep waits d on the Clock or until ctx ends; it reports whether ctx is
// still alive.
func (o *Operator) sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := o.settings.Clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C():
		return true
	case <-ctx.Done():
		return false
	}
}
