package host

import (
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/charmbracelet/log"
)

// Failure classes: why a call into the guest failed.
const (
	// FailureTrap: the guest trapped (a panic, an out-of-bounds access,
	// its memory cap) or its instance could not be created.
	FailureTrap = "trap"
	// FailureTimeout: the call ran past the plugin's timeout.
	FailureTimeout = "timeout"
	// FailureBusy: no instance became free in time.
	FailureBusy = "busy"
	// FailureInvalid: the guest's answer made no sense (a redirect without
	// a Location).
	FailureInvalid = "invalid"
)

// DefaultFailureLogInterval is how often a plugin that keeps failing logs
// a summary line per failure class (EngineOptions.FailureLogInterval).
const DefaultFailureLogInterval = 30 * time.Second

// FailureStats are one plugin generation's run-time failures: the requests
// it ran on since it loaded, how many failed, by class, and the last error.
type FailureStats struct {
	// Since is when the generation was loaded; the counts start there.
	Since time.Time
	// Requests counts the requests the plugin was called for.
	Requests uint64
	// Failed counts those that failed (answered per the failure policy).
	Failed uint64
	// ByClass splits Failed by FailureTrap, FailureTimeout, FailureBusy
	// and FailureInvalid; nil when nothing failed.
	ByClass map[string]uint64
	// LastError is the last failure's error, on one line (with the guest's
	// panic message when it printed one); LastFailure is when it happened.
	LastError   string
	LastFailure time.Time
}

// failures counts a plugin's run-time failures and keeps its log to one
// line per failure class and action per interval: the first failure is
// logged at once, the ones after it within the interval are counted and
// summed up in one line when the interval ends. Under load a failing
// plugin fails on every request; a line (or a stack trace) per request
// would bury everything else in the proxy's log.
type failures struct {
	log      *log.Logger
	interval time.Duration
	since    time.Time
	requests atomic.Uint64

	mu      sync.Mutex
	failed  uint64
	byClass map[string]uint64
	lastErr string
	lastAt  time.Time
	lines   map[failureLine]*lineState
	closed  bool
}

// failureLine is what one log line is about: a class of failure and what
// the host did about it.
type failureLine struct {
	class, msg string
	level      log.Level
}

type lineState struct {
	logged  time.Time // when the last line was written
	pending uint64    // failures since then, not logged yet
	lastErr string
	timer   *time.Timer
}

func newFailures(l *log.Logger, interval time.Duration) *failures {
	if interval <= 0 {
		interval = DefaultFailureLogInterval
	}
	return &failures{log: l, interval: interval, since: time.Now(), lines: map[failureLine]*lineState{}}
}

// record counts a failure and logs it, throttled. msg says what the host
// did (answered 503, skipped the plugin); level is its log level.
func (f *failures) record(class string, err error, level log.Level, msg string) {
	full := err.Error()
	text, _, multiline := strings.Cut(full, "\n")
	now := time.Now()
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failed++
	if f.byClass == nil {
		f.byClass = map[string]uint64{}
	}
	f.byClass[class]++
	f.lastErr, f.lastAt = text, now
	if f.closed {
		return
	}
	key := failureLine{class: class, msg: msg, level: level}
	st := f.lines[key]
	if st == nil {
		st = &lineState{}
		f.lines[key] = st
	}
	if !st.logged.IsZero() && now.Sub(st.logged) < f.interval {
		st.pending++
		st.lastErr = text
		if st.timer == nil {
			st.timer = time.AfterFunc(st.logged.Add(f.interval).Sub(now), func() { f.flush(key) })
		}
		return
	}
	if st.pending > 0 {
		// The interval is over but its timer has not run yet: one
		// summary covers this failure too.
		st.pending++
		st.lastErr = text
		if st.timer != nil {
			st.timer.Stop()
			st.timer = nil
		}
		f.summarize(key, st, now)
		return
	}
	st.logged = now
	f.log.Log(level, msg, "class", class, "err", text)
	// The full error (wazero's wasm stack trace) only at debug, and only
	// with the lines above.
	var ce *callError
	if errors.As(err, &ce) {
		f.log.Debug("plugin failure detail", "class", class, "err", ce.err)
	} else if multiline {
		f.log.Debug("plugin failure detail", "class", class, "err", full)
	}
}

// flush writes the summary line of key's failures since its last line.
func (f *failures) flush(key failureLine) {
	f.mu.Lock()
	defer f.mu.Unlock()
	st := f.lines[key]
	if st == nil {
		return
	}
	st.timer = nil
	f.summarize(key, st, time.Now())
}

func (f *failures) summarize(key failureLine, st *lineState, now time.Time) {
	if st.pending == 0 {
		return
	}
	f.log.Log(key.level, key.msg+" (repeated)", "class", key.class, "count", st.pending,
		"since", now.Sub(st.logged).Round(time.Second), "last_err", st.lastErr)
	st.logged, st.pending, st.lastErr = now, 0, ""
}

// close writes the summaries still pending and stops the timers.
func (f *failures) close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return
	}
	f.closed = true
	now := time.Now()
	for key, st := range f.lines {
		if st.timer != nil {
			st.timer.Stop()
			st.timer = nil
		}
		f.summarize(key, st, now)
	}
}

func (f *failures) stats() FailureStats {
	s := FailureStats{Since: f.since, Requests: f.requests.Load()}
	f.mu.Lock()
	defer f.mu.Unlock()
	s.Failed, s.LastError, s.LastFailure = f.failed, f.lastErr, f.lastAt
	if len(f.byClass) > 0 {
		s.ByClass = make(map[string]uint64, len(f.byClass))
		for k, v := range f.byClass {
			s.ByClass[k] = v
		}
	}
	// A request counted as failed before it was counted as a request
	// (the two counters are not read atomically together).
	s.Requests = max(s.Requests, s.Failed)
	return s
}

// classOf is the failure class of a failed call's error.
func classOf(err error) string {
	switch {
	case errors.Is(err, errBusy):
		return FailureBusy
	case IsDeadline(err):
		return FailureTimeout
	}
	return FailureTrap
}

// callError is a call into the guest that failed. Its message is one line:
// wazero's first line (the wasm stack trace below it is only in the debug
// log) and the guest's own panic message, which is what a plugin author
// needs to see.
type callError struct {
	plugin, fn string
	err        error
	guest      string
}

func (e *callError) Error() string {
	msg, _, _ := strings.Cut(e.err.Error(), "\n")
	if e.guest != "" {
		msg += " (guest: " + e.guest + ")"
	}
	return "plugin " + e.plugin + ": " + e.fn + ": " + msg
}

func (e *callError) Unwrap() error { return e.err }
