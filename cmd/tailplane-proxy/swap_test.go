package main

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/tailplane/tailplane/internal/testpoll"
)

// swapRate is the load during swaps: requests per second, each in its own
// goroutine, over kept-alive connections.
const swapRate = 80

// A rolling update by digest: the operator hands the proxy a new config
// whose plugin module is another digest; under constant load the proxy
// swaps v1 for v2 with no failed request, and once any client has had an
// answer from v2 no request that starts later is answered by v1. The state
// Secret then reports v2's digest (what status.loadedBy shows).
func TestPluginSwapUnderLoad(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	v1, v2 := buildMarker(t, "v1"), buildMarker(t, "v2")
	kube := env.Clientset(t)
	ns := env.Namespace(t)
	spec1, sha1 := storeModule(ctx, t, kube, ns, v1)
	spec2, sha2 := storeModule(ctx, t, kube, ns, v2)
	p := startSwapProxy(ctx, t, kube, ns, spec1)
	testpoll.Until(t, 30*time.Second, "v1 answers", func() error {
		v, err := p.get(ctx)
		if err == nil && v != "v1" {
			err = fmt.Errorf("answered by %q", v)
		}
		return err
	})
	testpoll.Until(t, 10*time.Second, "v1 reported", func() error {
		if got, err := p.reported(ctx); err != nil || got != sha1 {
			return fmt.Errorf("reported %s, %v; want %s", got, err, sha1)
		}
		return nil
	})

	l := startLoad(ctx, p, swapRate)
	testpoll.UntilTrue(t, 30*time.Second, "a baseline of answers from v1", func() bool { return l.count("v1") >= swapRate })
	swapAt := time.Now()
	p.write(t, spec2)
	testpoll.UntilTrue(t, 60*time.Second, "answers from v2", func() bool { return l.count("v2") > 0 })
	// Keep the load on for a while after the swap: late v1 answers and
	// failures from the retired generation would show here.
	seen := time.Now()
	testpoll.UntilTrue(t, 30*time.Second, "load after the swap", func() bool { return l.countAfter(seen) >= swapRate })
	r := analyse(l.finish(), "v1", "v2", swapAt)
	t.Logf("%d requests at %d/s; v2 first answered %v after the config write; %d requests during the swap; longest latency %v before, %v during",
		r.total, swapRate, r.firstNew.Round(time.Millisecond), r.during, r.maxBefore.Round(time.Millisecond), r.maxDuring.Round(time.Millisecond))
	if r.failed != 0 {
		t.Errorf("%d of %d requests failed during the swap, e.g. %q", r.failed, r.total, r.failures)
	}
	if r.stale != 0 {
		t.Errorf("%d requests that started after the first v2 answer were answered by v1", r.stale)
	}
	if r.during == 0 {
		t.Errorf("no request was in flight during the swap; the load proves nothing")
	}
	testpoll.Until(t, 10*time.Second, "v2 reported", func() error {
		if got, err := p.reported(ctx); err != nil || got != sha2 {
			return fmt.Errorf("reported %s, %v; want %s", got, err, sha2)
		}
		return nil
	})
}

// BenchmarkPluginSwapUnderLoad swaps the plugin between two digests b.N
// times under constant load and reports, over all swaps: failed requests,
// stale answers (old version after the first new one), requests in flight
// during a swap, how long a swap takes to show (config write to first
// answer of the new version) and the longest request latency before and
// during swaps. docs/performance.md has the numbers.
func BenchmarkPluginSwapUnderLoad(b *testing.B) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	mods := map[string][]byte{"v1": buildMarker(b, "v1"), "v2": buildMarker(b, "v2")}
	kube := env.Clientset(b)
	ns := env.Namespace(b)
	spec1, _ := storeModule(ctx, b, kube, ns, mods["v1"])
	spec2, _ := storeModule(ctx, b, kube, ns, mods["v2"])
	specs := map[string][]byte{"v1": spec1, "v2": spec2}
	p := startSwapProxy(ctx, b, kube, ns, spec1)
	testpoll.Until(b, 30*time.Second, "v1 answers", func() error {
		_, err := p.get(ctx)
		return err
	})
	var total, failed, stale, during int
	var toNew, maxBefore, maxDuring time.Duration
	cur := "v1"
	b.ResetTimer()
	for range b.N {
		next := map[string]string{"v1": "v2", "v2": "v1"}[cur]
		l := startLoad(ctx, p, swapRate)
		testpoll.UntilTrue(b, 30*time.Second, "a baseline", func() bool { return l.count(cur) >= swapRate })
		swapAt := time.Now()
		p.write(b, specs[next])
		testpoll.UntilTrue(b, 60*time.Second, "answers from "+next, func() bool { return l.count(next) > 0 })
		seen := time.Now()
		testpoll.UntilTrue(b, 30*time.Second, "load after the swap", func() bool { return l.countAfter(seen) >= swapRate })
		r := analyse(l.finish(), cur, next, swapAt)
		total, failed, stale, during = total+r.total, failed+r.failed, stale+r.stale, during+r.during
		toNew += r.firstNew
		maxBefore, maxDuring = max(maxBefore, r.maxBefore), max(maxDuring, r.maxDuring)
		cur = next
	}
	b.StopTimer()
	b.ReportMetric(float64(failed), "failed")
	b.ReportMetric(float64(stale), "stale")
	b.ReportMetric(float64(total)/float64(b.N), "reqs/op")
	b.ReportMetric(float64(during)/float64(b.N), "reqs-during-swap/op")
	b.ReportMetric(float64(toNew.Milliseconds())/float64(b.N), "ms-to-new/op")
	b.ReportMetric(float64(maxBefore.Microseconds())/1000, "max-ms-before")
	b.ReportMetric(float64(maxDuring.Microseconds())/1000, "max-ms-during")
}
