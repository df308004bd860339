package runtime

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// jobResource is the resource label of jobs in the handler metrics.
const jobResource = "(job)"

// job is an Every registration: upkeep of the whole operator that belongs
// to no object.
type job struct {
	id       string
	interval time.Duration
	fn       Hook
}

// Every runs fn on the leader once the informers have synced at the start
// of each term of leadership, then every interval until the term ends: the
// upkeep that belongs to no object, such as finding what a process that
// died half-way left behind in another system. Runs of one job never
// overlap. A failed run is logged (and counted in the handler metrics,
// resource "(job)") and tried again at the next tick; it never stops the
// operator. The term's end cancels fn's context and waits for it before
// the cleanup hooks run.
func (o *Operator) Every(id string, interval time.Duration, fn Hook) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	var err error
	switch {
	case !validID.MatchString(id):
		err = fmt.Errorf("id must match %s", validID)
	case fn == nil:
		err = fmt.Errorf("function is nil")
	case interval <= 0:
		err = fmt.Errorf("interval must be positive, got %s", interval)
	case o.ran.Load():
		err = fmt.Errorf("registered after Run started: register every job before Run")
	}
	for _, j := range o.jobs {
		if err == nil && j.id == id {
			err = fmt.Errorf("id already registered")
		}
	}
	if err != nil {
		err = fmt.Errorf("job %q: %w", id, err)
		o.errs = append(o.errs, err)
		return err
	}
	o.jobs = append(o.jobs, job{id: id, interval: interval, fn: fn})
	return nil
}

// startJobs runs every job until ctx (the term's) ends; the returned
// function waits for the runs in flight.
func (o *Operator) startJobs(ctx context.Context) (wait func()) {
	var wg sync.WaitGroup
	for _, j := range o.jobs {
		wg.Go(func() {
			tick := o.settings.Clock.NewTicker(j.interval)
			defer tick.Stop()
			for {
				o.runJob(ctx, j)
				select {
				case <-ctx.Done():
					return
				case <-tick.C():
				}
			}
		})
	}
	return wg.Wait
}

func (o *Operator) runJob(ctx context.Context, j job) {
	began := o.settings.Clock.Now()
	err := j.fn(ctx)
	if ctx.Err() != nil {
		return // the term ended during the run
	}
	o.metrics.handlerDuration.WithLabelValues(jobResource, j.id).Observe(o.settings.Clock.Since(began).Seconds())
	outcome := "success"
	if err != nil {
		outcome = "error"
	}
	o.metrics.handlerOutcomes.WithLabelValues(jobResource, j.id, outcome).Inc()
	if err != nil {
		o.log.Warn("periodic job failed, will run again", "job", j.id, "in", j.interval, "err", err)
	}
}
