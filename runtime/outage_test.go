package runtime_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/tailplane/tailplane/internal/testpoll"
	"github.com/tailplane/tailplane/runtime"
)

// Short Lease timings keep the outage tests quick; the outage outlasts
// RenewDeadline + RetryPeriod, so leadership is really lost (the default
// 10 s + 2 s is what a 20 s outage exceeded).
func quickLease(ns, name, id string) *runtime.LeaderElection {
	return &runtime.LeaderElection{Namespace: ns, Name: name, Identity: id,
		LeaseDuration: 5 * time.Second, RenewDeadline: 3 * time.Second, RetryPeriod: 250 * time.Millisecond}
}

func alive(r *running) bool {
	select {
	case <-r.done:
		return false
	default:
		return true
	}
}

// An API server outage longer than RenewDeadline costs a single replica its
// leadership, not its process: it stops handling, campaigns again while the
// API server is away, and when it is back leads again, with its startup
// hooks run anew and its handlers working.
func TestLeaderRecampaignsAfterAPIOutage(t *testing.T) {
	gvr := newCRD(t, false)
	ns := env.Namespace(t)
	cut, cfg := env.CutOff(t)
	s := testSettings()
	s.LeaderElection = quickLease(ns, "outage", "only")
	op, err := runtime.New(cfg, s)
	if err != nil {
		t.Fatal(err)
	}
	var startups, cleanups atomic.Int32
	op.OnStartup(func(context.Context) error { startups.Add(1); return nil })
	op.OnCleanup(func(context.Context) error { cleanups.Add(1); return nil })
	var handled counter
	op.OnCreate(gvr, "h", func(_ context.Context, ev *runtime.Event) (any, error) {
		handled.inc(ev.Object.GetName())
		return "done", nil
	})
	r := start(t, op)
	create(t, gvr, widget(ns, "w1", nil, nil))
	testpoll.UntilTrue(t, 20*time.Second, "w1 handled", func() bool { return nested(get(t, gvr, ns, "w1"), "status.h") == "done" })

	cut.Start()
	testpoll.UntilTrue(t, 20*time.Second, "leadership lost during the outage", func() bool { return !op.Leading() || !alive(r) })
	// The term ends with its cleanup hooks once in-flight writes gave up
	// (each is bounded by the runtime's 30 s patch timeout).
	testpoll.UntilTrue(t, 40*time.Second, "the term's cleanup hooks", func() bool { return cleanups.Load() == 1 || !alive(r) })
	testpoll.AlwaysTrue(t, 2*time.Second, "standing by, Run alive, while the API server is away", func() bool {
		return alive(r) && !op.Leading() && cleanups.Load() == 1
	})
	cut.End()
	testpoll.UntilTrue(t, 30*time.Second, "leading again after the outage", func() bool {
		if !alive(r) {
			t.Fatalf("Run returned: %v", r.err)
		}
		return op.Leading() && op.Ready()
	})
	if startups.Load() != 2 {
		t.Fatalf("startup hooks ran %d times, want 2 (one per term)", startups.Load())
	}
	create(t, gvr, widget(ns, "w2", nil, nil))
	testpoll.UntilTrue(t, 20*time.Second, "w2 handled after the outage", func() bool { return nested(get(t, gvr, ns, "w2"), "status.h") == "done" })
	if handled.get("w1") != 1 {
		t.Fatalf("w1 created once but handled %d times", handled.get("w1"))
	}
}

// Of two replicas, the leader cut off from the API server loses the Lease
// to the other and stands by without crashing; at no moment do both lead;
// when the new leader goes, the old one takes over again.
func TestPartitionedLeaderStandsBy(t *testing.T) {
	gvr := newCRD(t, false)
	ns := env.Namespace(t)
	var handledBy [2]counter // by object name
	ops := make([]*runtime.Operator, 2)
	runs := make([]*running, 2)
	cut, cfgA := env.CutOff(t)
	for i, cfg := range []*rest.Config{cfgA, env.Config(t)} {
		s := testSettings()
		s.LeaderElection = quickLease(ns, "partition", []string{"a", "b"}[i])
		op, err := runtime.New(cfg, s)
		if err != nil {
			t.Fatal(err)
		}
		op.OnCreate(gvr, "h", func(_ context.Context, ev *runtime.Event) (any, error) {
			if !ops[i].Leading() {
				t.Errorf("replica %d handled while not leading", i)
			}
			handledBy[i].inc(ev.Object.GetName())
			return []string{"a", "b"}[i], nil
		})
		ops[i] = op
		if i == 0 {
			runs[i] = start(t, op)
			continue
		}
		ctx, cancel := context.WithCancel(context.Background())
		r := &running{cancel: cancel, done: make(chan struct{})}
		go func() { r.err = op.Run(ctx); close(r.done) }()
		t.Cleanup(func() { cancel(); <-r.done })
		runs[i] = r
	}
	// Sample both replicas all along: two leaders at once is the failure
	// leader election exists to prevent.
	var both atomic.Bool
	watch, stopWatch := context.WithCancel(context.Background())
	defer stopWatch()
	go func() {
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		for watch.Err() == nil {
			if ops[0].Leading() && ops[1].Leading() {
				both.Store(true)
			}
			<-tick.C
		}
	}()
	testpoll.AlwaysTrue(t, time.Second, "a leads, b stands by", func() bool { return ops[0].Leading() && !ops[1].Leading() && ops[1].Ready() })
	create(t, gvr, widget(ns, "w1", nil, nil))
	// Cut only once the result is stored, or a retry while a still leads
	// (at-least-once) would count as a second handling.
	testpoll.UntilTrue(t, 20*time.Second, "w1 handled by a", func() bool { return nested(get(t, gvr, ns, "w1"), "status.h") == "a" })

	cut.Start()
	testpoll.UntilTrue(t, 30*time.Second, "b leads once a's Lease expired", func() bool { return ops[1].Leading() && ops[1].Ready() })
	create(t, gvr, widget(ns, "w2", nil, nil))
	testpoll.UntilTrue(t, 20*time.Second, "w2 handled by b", func() bool { return nested(get(t, gvr, ns, "w2"), "status.h") == "b" })
	cut.End()
	testpoll.AlwaysTrue(t, 3*time.Second, "a stands by after the partition, Run alive and ready", func() bool {
		return alive(runs[0]) && !ops[0].Leading() && ops[0].Ready() && ops[1].Leading()
	})

	runs[1].cancel()
	<-runs[1].done
	if runs[1].err != nil {
		t.Fatalf("b's Run: %v", runs[1].err)
	}
	testpoll.UntilTrue(t, 20*time.Second, "a leads again once b released the Lease", func() bool { return ops[0].Leading() && ops[0].Ready() })
	create(t, gvr, widget(ns, "w3", nil, nil))
	testpoll.UntilTrue(t, 20*time.Second, "w3 handled by a", func() bool { return nested(get(t, gvr, ns, "w3"), "status.h") == "a" })
	if a, b := handledBy[0].String(), handledBy[1].String(); a != "map[w1:1 w3:1]" || b != "map[w2:1]" {
		t.Fatalf("each object must be handled once, by the leader of the moment: a handled %s, b handled %s", a, b)
	}
	stopWatch()
	if both.Load() {
		t.Fatal("both replicas led at the same moment")
	}
	if !alive(runs[0]) {
		t.Fatalf("a's Run returned: %v", runs[0].err)
	}
}
