package runtime

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/cache"
)

// Run serves health and metrics, waits for leadership when leader election
// is configured, then watches and handles until ctx ends. On return every
// in-flight handler has finished or was cancelled after ShutdownTimeout.
// Losing leadership does not end Run: the replica cancels its handlers at
// once, runs the cleanup hooks, stands by and campaigns again; each new term
// starts like a fresh process (startup hooks, informers, resume handlers).
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
		return o.runActive(ctx, ctx)
	}
	if le.Namespace == "" || le.Name == "" {
		return errors.New("runtime: leader election needs a Lease namespace and name")
	}
	return o.lead(ctx, le)
}

// runActive is the leader's work: hooks, informers, workers, shutdown. It
// runs until ctx ends; when run (the whole Run's context) is still alive
// then, leadership was lost and handlers are cancelled at once rather than
// given ShutdownTimeout, since another replica may soon lead.
func (o *Operator) runActive(ctx, run context.Context) error {
	o.beginTerm()
	o.ctx.Store(&ctx)
	for _, hook := range o.startup {
		if err := hook(ctx); err != nil {
			if ctx.Err() != nil && run.Err() == nil {
				return o.shutdown(nil, nil, 0) // lost leadership while starting
			}
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
		return o.shutdown(nil, nil, o.settings.ShutdownTimeout)
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
	waitJobs := o.startJobs(ctx)
	<-ctx.Done()
	grace := o.settings.ShutdownTimeout
	if run.Err() == nil {
		grace = 0
	}
	// Jobs stop with the term: no upkeep once another replica may lead.
	waitJobs()
	return o.shutdown(&workers, cancelWork, grace)
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

// shutdown stops taking keys, gives in-flight handlers grace, stops
// daemons and runs cleanup hooks within ShutdownTimeout.
func (o *Operator) shutdown(workers *sync.WaitGroup, cancelWork context.CancelFunc, grace time.Duration) error {
	o.stopping.Store(true)
	o.synced.Store(false)
	o.queue.ShutDown()
	bound := o.settings.ShutdownTimeout
	if workers != nil {
		finished := make(chan struct{})
		go func() { workers.Wait(); close(finished) }()
		if grace <= 0 {
			cancelWork()
		}
		select {
		case <-finished:
		case <-time.After(grace):
			if grace > 0 {
				o.log.Warn("handlers still running after the shutdown bound, cancelling them", "bound", grace)
			}
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
