package runtime

import (
	"context"
	"fmt"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/client-go/util/workqueue"
)

// lead campaigns for the Lease and runs the active phase while this replica
// holds it, until ctx ends. Losing the Lease (an API server outage longer
// than RenewDeadline, a network partition) ends only the term: the replica
// stops handling, stands by and campaigns again, so a process restart is
// never needed to recover. Only a failed startup hook ends lead with an
// error.
func (o *Operator) lead(ctx context.Context, le *LeaderElection) error {
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1ObjectMeta(le.Namespace, le.Name),
		Client:     o.kube.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: le.Identity},
	}
	for {
		led, err := o.term(ctx, le, lock)
		if err != nil || ctx.Err() != nil {
			return err
		}
		if led {
			o.log.Warn("leadership lost: handling stopped; standing by and campaigning again", "identity", le.Identity)
		}
	}
}

// term campaigns once and, when elected, runs the active phase until the
// Lease is lost or ctx ends. It reports whether this replica led.
func (o *Operator) term(ctx context.Context, le *LeaderElection, lock *resourcelock.LeaseLock) (bool, error) {
	// The elector's context outlives ctx: on a graceful shutdown the active
	// phase finishes first and only then stops the elector and releases the
	// Lease, so that a successor never handles while our in-flight
	// handlers still run. A replica that is not leading stops at once.
	electCtx, stopElecting := context.WithCancel(context.WithoutCancel(ctx))
	defer stopElecting()
	// started records whether the active phase began; client-go starts it
	// in a goroutine that may run only after elector.Run returned, so once
	// term has looked (over) it may no longer begin.
	var mu sync.Mutex
	var started, over bool
	stopStandby := context.AfterFunc(ctx, func() {
		mu.Lock()
		defer mu.Unlock()
		if !started {
			stopElecting()
		}
	})
	defer stopStandby()
	var runErr error
	// client-go runs OnStartedLeading in a goroutine of its own and does not
	// wait for it: activeDone lets term return only after the shutdown.
	activeDone := make(chan struct{})
	elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:          lock,
		LeaseDuration: le.LeaseDuration,
		RenewDeadline: le.RenewDeadline,
		RetryPeriod:   le.RetryPeriod,
		// Not client-go's ReleaseOnCancel: it releases before cancelling
		// the leader's context, and the release may itself wait
		// RenewDeadline during an outage, which would let handlers run past
		// the Lease's expiry. release below runs after the active phase.
		ReleaseOnCancel: false,
		Name:            le.Name,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(leadCtx context.Context) {
				mu.Lock()
				if over {
					mu.Unlock()
					return
				}
				started = true
				mu.Unlock()
				defer close(activeDone)
				defer stopElecting()
				active, cancel := context.WithCancel(leadCtx)
				defer cancel()
				stopWithCtx := context.AfterFunc(ctx, cancel)
				defer stopWithCtx()
				o.log.Info("leading", "identity", le.Identity)
				o.leading.Store(true)
				runErr = o.runActive(active, ctx)
				if runErr != nil {
					// Set before the Lease is given up: this replica
					// is stopping, not standing by.
					o.failed.Store(true)
				}
			},
			OnStoppedLeading: func() {
				if o.leading.Swap(false) {
					o.log.Info("stopped leading", "identity", le.Identity)
				}
			},
		},
	})
	if err != nil {
		return false, fmt.Errorf("runtime: leader election: %w", err)
	}
	elector.Run(electCtx)
	mu.Lock()
	over = true
	led := started
	mu.Unlock()
	if !led {
		return false, nil
	}
	<-activeDone
	o.leading.Store(false)
	// A term that ended because the Lease could not be renewed leaves the
	// Lease alone: the API server is likely unreachable, and the Lease
	// still naming this replica lets it win again at once when it returns.
	if ctx.Err() != nil || runErr != nil {
		o.release(lock, le)
	}
	return true, runErr
}

// release hands the Lease over at once (as client-go's ReleaseOnCancel
// does) if this replica still holds it, instead of making a successor wait
// for its expiry.
func (o *Operator) release(lock *resourcelock.LeaseLock, le *LeaderElection) {
	ctx, cancel := context.WithTimeout(context.Background(), le.RenewDeadline)
	defer cancel()
	rec, _, err := lock.Get(ctx)
	if err != nil {
		o.log.Warn("cannot release the Lease; a successor waits for it to expire", "lease", le.Namespace+"/"+le.Name, "err", err)
		return
	}
	if rec.HolderIdentity != le.Identity {
		return
	}
	now := time.Now()
	released := resourcelock.LeaderElectionRecord{
		LeaderTransitions:    rec.LeaderTransitions,
		LeaseDurationSeconds: 1,
		RenewTime:            metav1.NewTime(now),
		AcquireTime:          metav1.NewTime(now),
	}
	if err := lock.Update(ctx, released); err != nil {
		o.log.Warn("cannot release the Lease; a successor waits for it to expire", "lease", le.Namespace+"/"+le.Name, "err", err)
	}
}

// beginTerm resets what a previous term of leadership left behind, so that
// each term starts as a fresh process would: an empty queue, no stale
// marks, no pending Enqueue requests, resume handlers due again (another
// replica may have handled the objects meanwhile) and indexes rebuilt from
// the new informers' lists. The first term keeps what was queued before Run.
func (o *Operator) beginTerm() {
	if !o.queue.renew() {
		return
	}
	o.stopping.Store(false)
	o.stateMu.Lock()
	clear(o.stale)
	clear(o.unsure)
	clear(o.resumed)
	clear(o.enqueued)
	o.stateMu.Unlock()
	for _, x := range o.indexes {
		x.reset()
	}
}

func (x *Index) reset() {
	x.mu.Lock()
	defer x.mu.Unlock()
	clear(x.entries)
	clear(x.byObj)
}

// termQueue is the workqueue of the current term. A client-go workqueue
// cannot be restarted once shut down, and each term of leadership ends with
// a shutdown, so renew replaces it; keys added while no term runs are
// dropped (the next term's informers list every object again).
type termQueue struct {
	mu   sync.RWMutex
	cur  workqueue.TypedRateLimitingInterface[Key]
	make func() workqueue.TypedRateLimitingInterface[Key]
}

func newTermQueue(mk func() workqueue.TypedRateLimitingInterface[Key]) *termQueue {
	return &termQueue{cur: mk(), make: mk}
}

// renew starts a new queue if the current one was shut down, and reports
// whether it did. Call it only when no worker of the previous term runs.
func (q *termQueue) renew() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if !q.cur.ShuttingDown() {
		return false
	}
	q.cur = q.make()
	return true
}

func (q *termQueue) get() workqueue.TypedRateLimitingInterface[Key] {
	q.mu.RLock()
	defer q.mu.RUnlock()
	return q.cur
}

func (q *termQueue) Add(k Key)                       { q.get().Add(k) }
func (q *termQueue) Len() int                        { return q.get().Len() }
func (q *termQueue) Get() (Key, bool)                { return q.get().Get() }
func (q *termQueue) Done(k Key)                      { q.get().Done(k) }
func (q *termQueue) ShutDown()                       { q.get().ShutDown() }
func (q *termQueue) ShutDownWithDrain()              { q.get().ShutDownWithDrain() }
func (q *termQueue) ShuttingDown() bool              { return q.get().ShuttingDown() }
func (q *termQueue) AddAfter(k Key, d time.Duration) { q.get().AddAfter(k, d) }
func (q *termQueue) AddRateLimited(k Key)            { q.get().AddRateLimited(k) }
func (q *termQueue) Forget(k Key)                    { q.get().Forget(k) }
func (q *termQueue) NumRequeues(k Key) int           { return q.get().NumRequeues(k) }
