package main

import (
	"context"
	"time"

	"github.com/tailplane/tailplane/internal/proxystate"
	"github.com/tailplane/tailplane/plugins/host"
)

// Defaults of failureWatch: failures are sampled every second, the recent
// rate covers the last minute, and a plugin that keeps failing is reported
// again at most every 10 s (each report is a write of the state Secret and
// a status update of the RoutingPlugin).
const (
	failureTick   = time.Second
	failureWindow = time.Minute
	failureMinGap = 10 * time.Second
)

// failureWatch turns the plugins' run-time failure counters into the
// failures of plugin_status. It samples the counters every tick and keeps,
// per serving generation, the samples of the last window; the report is
// due when a plugin starts failing (at once), while it keeps failing (at
// most every minGap) and when its window holds no failure any more (once).
// Its methods run under pluginLoader.mu.
type failureWatch struct {
	window, minGap time.Duration
	series         map[string]*series // by plugin name
	written        map[string]writtenFailures
	lastWrite      time.Time
}

// writtenFailures is what the last report said of a plugin.
type writtenFailures struct {
	failing bool
	failed  uint64
}

// series are the samples of one generation of a plugin.
type series struct {
	cur     host.FailureStats
	samples []failureSample // oldest first; samples[0] is the window's baseline

	recentRequests, recentFailed uint64
}

type failureSample struct {
	at               time.Time
	requests, failed uint64
}

func newFailureWatch(window, minGap time.Duration) *failureWatch {
	return &failureWatch{window: window, minGap: minGap, series: map[string]*series{}, written: map[string]writtenFailures{}}
}

// observe records the counters at now and reports whether a report is due.
func (w *failureWatch) observe(now time.Time, stats map[string]host.FailureStats) bool {
	cut := now.Add(-w.window)
	for name, st := range stats {
		s := w.series[name]
		if s == nil || !s.cur.Since.Equal(st.Since) {
			// A new generation counts from zero.
			s = &series{}
			if st.Since.After(cut) {
				s.samples = []failureSample{{at: st.Since}}
			}
			w.series[name] = s
		}
		s.cur = st
		s.samples = append(s.samples, failureSample{at: now, requests: st.Requests, failed: st.Failed})
		for len(s.samples) > 1 && !s.samples[1].at.After(cut) {
			s.samples = s.samples[1:]
		}
		base := s.samples[0]
		s.recentRequests, s.recentFailed = st.Requests-min(base.requests, st.Requests), st.Failed-min(base.failed, st.Failed)
	}
	due := false
	for name := range w.series {
		if _, ok := stats[name]; !ok {
			delete(w.series, name)
		}
	}
	for name, s := range w.series {
		was := w.written[name]
		failing := s.recentFailed > 0
		switch {
		case failing != was.failing:
			due = true
		case failing && s.cur.Failed != was.failed && now.Sub(w.lastWrite) >= w.minGap:
			due = true
		}
	}
	return due
}

// failures is the report of a plugin's failures; nil if it never failed.
func (w *failureWatch) failures(name string) *proxystate.PluginFailures {
	s := w.series[name]
	if s == nil || s.cur.Failed == 0 {
		return nil
	}
	return &proxystate.PluginFailures{
		Since: s.cur.Since.UTC().Truncate(time.Second), Requests: s.cur.Requests, Failed: s.cur.Failed, ByClass: s.cur.ByClass,
		WindowSeconds: int(w.window / time.Second), RecentRequests: s.recentRequests, RecentFailed: s.recentFailed,
		LastError: s.cur.LastError, LastFailure: s.cur.LastFailure.UTC().Truncate(time.Second),
	}
}

// wrote records what a report written at now said.
func (w *failureWatch) wrote(now time.Time) {
	w.lastWrite = now
	clear(w.written)
	for name, s := range w.series {
		w.written[name] = writtenFailures{failing: s.recentFailed > 0, failed: s.cur.Failed}
	}
}

// watchFailures samples the plugins' failures every tick and rewrites
// plugin_status when failureWatch says so, until ctx ends.
func (l *pluginLoader) watchFailures(ctx context.Context, tick time.Duration) {
	t := time.NewTicker(tick)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		l.mu.Lock()
		if l.health.observe(time.Now(), l.manager.Failures()) {
			l.write(ctx)
		}
		l.mu.Unlock()
	}
}
