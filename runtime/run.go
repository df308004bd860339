package runtime

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// Run serves health and metrics, waits for leadership when leader election
// is configured, then watches and handles until ctx ends. On return every
// in-flight handler has finished or was cancelled after ShutdownTimeout.
// Losing leadership ends Run with an error, so that the process restarts
// clean.
func (o *Operator) Run(ctx context.Context) error {
	if !o.ran.CompareAndSwap(false, true) {
		return errors.New("runtime: Run called twice")
	}
	defer o.events.Shutdown()
	defer close(o.eventsDone)
	if err := o.Err(); err != nil {
		return fmt.Errorf("runtime: invalid registrations: %w", err)
	}
	if err := o.discover(ctx); err != nil {
		return err
	}
	srv, err := o.serve(ctx)
	if err != nil {
		return err
	}
	defer srv.shutdown()
	le := o.settings.LeaderElection
	if le == nil {
		o.leading.Store(true)
		return o.runActive(ctx)
	}
	if le.Namespace == "" || le.Name == "" {
		return errors.New("runtime: leader election needs a Lease namespace and name")
	}
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1ObjectMeta(le.Namespace, le.Name),
		Client:     o.kube.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: le.Identity},
	}
	// The elector keeps renewing until its context ends, so it gets one that
	// also ends when the active phase does: a startup hook that fails then
	// releases the Lease and ends Run instead of leaving it leading idle.
	electCtx, stopElecting := context.WithCancel(ctx)
	defer stopElecting()
	var runErr error
	var lost atomic.Bool
	// client-go runs OnStartedLeading in a goroutine of its own and does not
	// wait for it: activeDone lets Run return only after the shutdown.
	activeDone := make(chan struct{})
	var started atomic.Bool
	elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   le.LeaseDuration,
		RenewDeadline:   le.RenewDeadline,
		RetryPeriod:     le.RetryPeriod,
		ReleaseOnCancel: true, // hand over at once on a graceful shutdown
		Name:            le.Name,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(ctx context.Context) {
				defer close(activeDone)
				defer stopElecting()
				started.Store(true)
				o.log.Info("leading", "identity", le.Identity)
				o.leading.Store(true)
				runErr = o.runActive(ctx)
			},
			OnStoppedLeading: func() {
				lost.Store(o.leading.Swap(false))
				o.log.Info("stopped leading", "identity", le.Identity)
			},
		},
	})
	if err != nil {
		return fmt.Errorf("runtime: leader election: %w", err)
	}
	elector.Run(electCtx)
	if started.Load() {
		<-activeDone
	}
	if runErr != nil {
		return runErr
	}
	if lost.Load() && ctx.Err() == nil {
		return errors.New("runtime: leadership lost")
	}
	return nil
}

// runActive is the leader's work: hooks, informers, workers, shutdown.
func (o *Operator) runActive(ctx context.Context) error {
	o.ctx.Store(&ctx)
	for _, hook := range o.startup {
		if err := hook(ctx); err != nil {
			return fmt.Errorf("runtime: startup hook: %w", err)
		}
	}
	for _, s := range o.sourceList {
		s.start(ctx)
	}
	syncs := make([]cache.InformerSynced, 0, len(o.sourceList))
	for _, s := range o.sourceList {
		syncs = append(syncs, s.hasSynced)
	}
	if !cache.WaitForCacheSync(ctx.Done(), syncs...) {
		return o.shutdown(nil, nil)
	}
	o.synced.Store(true)
	o.log.Info("informers synced, handling", "sources", len(o.sourceList), "workers", o.settings.Workers)
	if o.settings.WatchCheckInterval > 0 {
		for _, s := range o.sourceList {
			go wait.UntilWithContext(ctx, s.checkHealth, o.settings.WatchCheckInterval)
		}
	}
	// Handlers get a context that outlives ctx by ShutdownTimeout, so that
	// in-flight work can finish on a graceful shutdown.
	work, cancelWork := context.WithCancel(context.WithoutCancel(ctx))
	var workers sync.WaitGroup
	for range o.settings.Workers {
		workers.Go(func() { o.worker(work) })
	}
	<-ctx.Done()
	return o.shutdown(&workers, cancelWork)
}

func (o *Operator) worker(ctx context.Context) {
	for {
		key, quit := o.queue.Get()
		if quit {
			return
		}
		if o.stopping.Load() {
			o.queue.Done(key)
			continue
		}
		after, err := o.process(ctx, key)
		switch {
		case err != nil:
			o.objectLogger(key).Warn("cycle failed, will retry", "err", err)
			o.queue.AddRateLimited(key)
		case after > 0:
			o.queue.Forget(key)
			o.queue.AddAfter(key, after)
		default:
			o.queue.Forget(key)
		}
		o.queue.Done(key)
	}
}

// shutdown stops taking keys, gives in-flight handlers ShutdownTimeout,
// stops daemons and runs cleanup hooks within the same bound.
func (o *Operator) shutdown(workers *sync.WaitGroup, cancelWork context.CancelFunc) error {
	o.stopping.Store(true)
	o.synced.Store(false)
	o.queue.ShutDown()
	bound := o.settings.ShutdownTimeout
	if workers != nil {
		finished := make(chan struct{})
		go func() { workers.Wait(); close(finished) }()
		select {
		case <-finished:
		case <-time.After(bound):
			o.log.Warn("handlers still running after the shutdown bound, cancelling them", "bound", bound)
			cancelWork()
			<-finished // cancelled cycles still write what finished, bounded by the patch timeout
		}
		cancelWork()
	}
	o.stopAllSpawned(bound)
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	var errs []error
	for _, hook := range o.cleanup {
		if err := hook(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("runtime: cleanup: %w", errors.Join(errs...))
	}
	return nil
}

// discoveryWait bounds how long Run waits for a watched group to appear in
// discovery.
const discoveryWait = 30 * time.Second

// discover finds which resources have a status subresource, so that results
// are written where the API server accepts them.
func (o *Operator) discover(ctx context.Context) error {
	seen := map[string]bool{}
	for _, s := range o.sourceList {
		gv := s.key.gvr.GroupVersion().String()
		if seen[gv] {
			continue
		}
		seen[gv] = true
		// A group whose CRD was just established can be missing from
		// discovery for a moment; so can one installed right after the
		// operator starts. Wait a bounded time for it.
		var list *metav1.APIResourceList
		var err error
		_ = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, discoveryWait, true, func(context.Context) (bool, error) {
			list, err = o.kube.Discovery().ServerResourcesForGroupVersion(gv)
			return err == nil || !apierrors.IsNotFound(err), nil
		})
		if err != nil {
			return fmt.Errorf("runtime: discover %s: %w", gv, err)
		}
		o.mu.Lock()
		for _, r := range list.APIResources {
			if name, ok := strings.CutSuffix(r.Name, "/status"); ok {
				o.statusSub[s.key.gvr.GroupVersion().WithResource(name)] = true
			}
		}
		o.mu.Unlock()
	}
	return ctx.Err()
}
