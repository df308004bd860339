package host_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/log"

	"github.com/tailplane/tailplane/internal/syncbuf"
	"github.com/tailplane/tailplane/internal/testpoll"
	"github.com/tailplane/tailplane/plugins/host"
	"github.com/tailplane/tailplane/plugins/internal/wasmbuild"
	"github.com/tailplane/tailplane/proxy/route"
)

// failureLines are the lines of a log after the plugin loaded.
func failureLines(s string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.TrimSpace(l) != "" && !strings.Contains(l, "plugin loaded") {
			out = append(out, l)
		}
	}
	return out
}

// A plugin that fails on every request logs one line when it starts
// failing and then one summary per interval with the count, each line
// whole (no wasm stack trace), with the guest's panic message, at the
// default log level; its counts and last error are kept for the proxy's
// report.
func TestFailuresLoggedOncePerIntervalWithThePanicMessage(t *testing.T) {
	for _, c := range []struct {
		policy host.FailurePolicy
		level  string
	}{{host.FailClosed, "ERRO"}, {host.FailOpen, "WARN"}} {
		t.Run(string(c.policy), func(t *testing.T) {
			logs := &syncbuf.Buffer{}
			const interval = 3 * time.Second
			e, err := host.NewEngine(host.EngineOptions{
				CacheDir:           wasmbuild.CompilationCacheDir(t),
				Logger:             log.NewWithOptions(logs, log.Options{Level: log.InfoLevel}), // the default level
				FailureLogInterval: interval,
			})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = e.Close(context.Background()) })
			p := misbehaving(t, e, "panics-"+string(c.policy), host.Config{FailurePolicy: c.policy})
			start := time.Now()
			const n = 20
			for range n {
				if _, err := p.Route(context.Background(), request("/panic"), route.Decision{}); err != nil {
					t.Fatal(err)
				}
			}
			lines := failureLines(logs.String())
			if time.Since(start) < interval {
				if len(lines) != 1 {
					t.Fatalf("%d failures logged %d lines within the interval, want 1:\n%s", n, len(lines), logs.String())
				}
			}
			first := lines[0]
			if !strings.HasPrefix(first, c.level) || !strings.Contains(first, "class=trap") ||
				!strings.Contains(first, "panic: the guest gives up on /panic") || !strings.Contains(first, "handle_request") {
				t.Errorf("first line %q: want the failure at %s with its class and the guest's panic message", first, c.level)
			}
			testpoll.UntilTrue(t, 2*interval+10*time.Second, "the interval's summary", func() bool {
				return len(failureLines(logs.String())) >= 2
			})
			lines = failureLines(logs.String())
			if len(lines) != 2 {
				t.Fatalf("%d lines, want the first failure and one summary:\n%s", len(lines), logs.String())
			}
			if s := lines[1]; !strings.HasPrefix(s, c.level) || !strings.Contains(s, "(repeated)") || !strings.Contains(s, "count=19") ||
				!strings.Contains(s, "panic: the guest gives up on /panic") {
				t.Errorf("summary %q: want the count of the other 19 failures and the last error", s)
			}
			if strings.Contains(logs.String(), "wasm stack trace") {
				t.Errorf("the stack trace reached the default level:\n%s", logs.String())
			}

			st := p.Failures()
			if st.Requests != n || st.Failed != n || st.ByClass[host.FailureTrap] != n || len(st.ByClass) != 1 {
				t.Errorf("stats %+v: want %d requests, all failed by trap", st, n)
			}
			if !strings.Contains(st.LastError, "panic: the guest gives up on /panic") || strings.Contains(st.LastError, "\n") || st.LastFailure.Before(start) {
				t.Errorf("last error %q at %v: want the panic message on one line", st.LastError, st.LastFailure)
			}
			servesNormally(t, p)
			if got := p.Failures(); got.Requests != n+1 || got.Failed != n {
				t.Errorf("after a good request: %+v, want %d requests and %d failed", got, n+1, n)
			}
		})
	}
}

// A timeout is its own class, and a quiet plugin logs nothing more.
func TestFailureClassesCountedApart(t *testing.T) {
	e, _ := newEngine(t)
	p := misbehaving(t, e, "classes", host.Config{Timeout: 50 * time.Millisecond, FailurePolicy: host.FailOpen})
	for _, uri := range []string{"/loop", "/panic", "/panic"} {
		if _, err := p.Route(context.Background(), request(uri), route.Decision{}); err != nil {
			t.Fatal(err)
		}
	}
	st := p.Failures()
	if st.Failed != 3 || st.ByClass[host.FailureTimeout] != 1 || st.ByClass[host.FailureTrap] != 2 {
		t.Errorf("stats %+v: want 1 timeout and 2 traps", st)
	}
}
