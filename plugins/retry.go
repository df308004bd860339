package plugins

import (
	"context"
	"time"
)

// Retry bounds: a plugin that failed to load is tried again after
// defaultRetryMin, doubling up to defaultRetryMax. Most failures in a proxy
// pass by themselves (the module copy not readable yet, an API hiccup, a
// cache folder gone): without retries a fail-closed plugin would answer 503
// until some unrelated config change. A module that is really broken was
// refused by the operator already, so retrying it costs little.
const (
	defaultRetryMin = time.Second
	defaultRetryMax = time.Minute
	// retryTimeout bounds one retry (fetches and compiles).
	retryTimeout = 2 * time.Minute
)

// retrier re-applies the last specs while some plugin failed to load. Its
// fields are guarded by Manager.mu.
type retrier struct {
	min, max time.Duration
	delay    time.Duration // the last delay; 0 when nothing failed
	timer    *time.Timer
	gen      uint64 // bumped by every schedule: a superseded timer does nothing
	ctx      context.Context
	cancel   context.CancelFunc
	stopped  bool
}

func (r *retrier) init(lo, hi time.Duration) {
	r.min, r.max = lo, hi
	if r.min <= 0 {
		r.min = defaultRetryMin
	}
	if r.max < r.min {
		r.max = max(defaultRetryMax, r.min)
	}
	r.ctx, r.cancel = context.WithCancel(context.Background())
}

// after schedules the next retry when a status in st carries an error.
// fresh (a new Apply) restarts the backoff; a retry that failed again
// doubles it.
func (r *retrier) after(m *Manager, specs []Spec, st []Status, fresh bool) {
	if r.timer != nil {
		r.timer.Stop()
		r.timer = nil
	}
	r.gen++
	if r.stopped || !anyFailed(st) {
		r.delay = 0
		return
	}
	if fresh || r.delay == 0 {
		r.delay = r.min
	} else {
		r.delay = min(2*r.delay, r.max)
	}
	gen, delay := r.gen, r.delay
	r.timer = time.AfterFunc(delay, func() { m.retryFailed(gen, specs, delay) })
}

func (r *retrier) stop() {
	r.stopped = true
	r.gen++
	if r.timer != nil {
		r.timer.Stop()
	}
	r.cancel()
}

func anyFailed(st []Status) bool {
	for _, s := range st {
		if s.Error != "" {
			return true
		}
	}
	return false
}

// retryFailed applies specs again, unless a newer Apply or Close came
// first. Plugins that loaded meanwhile stay as they are (same fingerprint);
// the failed ones load again, and their statuses are reported.
func (m *Manager) retryFailed(gen uint64, specs []Spec, waited time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.retry.gen != gen || m.retry.stopped {
		return
	}
	for _, s := range m.status {
		if s.Error != "" {
			m.log.Info("retrying a plugin that failed to load", "plugin", s.Name, "after", waited)
		}
	}
	ctx, cancel := context.WithTimeout(m.retry.ctx, retryTimeout)
	defer cancel()
	st := m.apply(ctx, specs)
	m.retry.after(m, specs, st, false)
}
