package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/charmbracelet/log"
	corev1 "k8s.io/api/core/v1"
)

// runStep runs one handler attempt and records its outcome in p. It returns
// false when the attempt was interrupted by shutdown (nothing recorded).
func (o *Operator) runStep(ctx context.Context, c *cycle, s step, p *progress) bool {
	h := s.h
	// One logger per step, with the object's key and the handler id: it is
	// both the handler's Event.Log and the runtime's voice about the step.
	logger := o.log.With("key", c.key.String(), "handler", h.id)
	now := o.settings.Clock.Now()
	if p.Started == 0 {
		p.Started = now.UnixMilli()
	}
	started := time.UnixMilli(p.Started)
	hctx, cancel := ctx, context.CancelFunc(func() {})
	if h.timeout > 0 {
		deadline := started.Add(h.timeout)
		if !now.Before(deadline) {
			o.fail(c, s, p, fmt.Errorf("%w after %s", ErrTimeout, h.timeout), logger)
			return true
		}
		hctx, cancel = context.WithDeadline(ctx, deadline)
	}
	defer cancel()
	ev := &Event{
		Cause: s.cause, HandlerID: h.id, Resource: c.key.Resource, Object: c.obj,
		Old: s.old, New: s.new, Diff: s.diff, Retry: p.Retries, Started: started,
		Log: logger, Patch: &c.patch, op: o, key: c.key,
	}
	result, err := call(hctx, h.fn, ev)
	res := c.key.Resource.String()
	o.metrics.handlerDuration.WithLabelValues(res, h.id).Observe(o.settings.Clock.Since(now).Seconds())
	if err == nil && result != nil {
		if _, jerr := json.Marshal(result); jerr != nil {
			err = Permanent(fmt.Errorf("result is not JSON: %w", jerr))
		}
	}
	var temp *TemporaryError
	var perm *PermanentError
	switch {
	case err == nil:
		*p = progress{Success: true, Started: p.Started, Retries: p.Retries}
		if result != nil {
			c.results[h.id] = result
		}
		o.metrics.handlerOutcomes.WithLabelValues(res, h.id, "success").Inc()
		logger.Info("handler succeeded", "cause", s.cause.String())
		// An enqueue is not a change of the object's own: its successes
		// (often many, one per change of what it depends on) post nothing.
		if !o.settings.QuietSuccess && s.cause != CauseEnqueue {
			o.post(c.obj, corev1.EventTypeNormal, ReasonHandled, "Handler %q succeeded (%s).", h.id, s.cause)
		}
	case ctx.Err() != nil:
		o.metrics.handlerOutcomes.WithLabelValues(res, h.id, "interrupted").Inc()
		logger.Warn("handler interrupted by shutdown")
		return false
	case h.timeout > 0 && errors.Is(hctx.Err(), context.DeadlineExceeded):
		o.fail(c, s, p, fmt.Errorf("%w after %s: %v", ErrTimeout, h.timeout, err), logger)
	case errors.As(err, &perm):
		o.fail(c, s, p, err, logger)
	default:
		p.Retries++
		if h.retries > 0 && p.Retries >= h.retries {
			o.fail(c, s, p, fmt.Errorf("%w (%d attempts): %v", ErrRetriesExceeded, p.Retries, err), logger)
			return true
		}
		delay := o.backoff(h, p.Retries)
		outcome := "error"
		if errors.As(err, &temp) {
			delay, outcome = temp.Delay, "temporary"
		}
		p.Delayed = now.Add(delay).UnixMilli()
		p.Message = truncate(err.Error(), maxMessage)
		o.metrics.handlerOutcomes.WithLabelValues(res, h.id, outcome).Inc()
		o.metrics.retries.WithLabelValues(res, h.id).Inc()
		logger.Warn("handler failed, will retry", "retry", p.Retries, "delay", delay, "err", err)
		o.post(c.obj, corev1.EventTypeWarning, ReasonRetry, "Handler %q failed, retry %d in %s: %s",
			h.id, p.Retries, delay, truncate(err.Error(), maxEventMessage))
	}
	return true
}

// fail ends a handler for this cause.
func (o *Operator) fail(c *cycle, s step, p *progress, err error, logger *log.Logger) {
	*p = progress{Failure: true, Started: p.Started, Retries: p.Retries, Message: truncate(err.Error(), maxMessage)}
	o.metrics.handlerOutcomes.WithLabelValues(c.key.Resource.String(), s.h.id, "permanent").Inc()
	logger.Error("handler failed permanently", "cause", s.cause.String(), "err", err)
	o.post(c.obj, corev1.EventTypeWarning, ReasonFailed, "Handler %q failed permanently: %s", s.h.id, truncate(err.Error(), maxEventMessage))
}

// backoff is the delay before retry n (1-based) after a plain error.
func (o *Operator) backoff(h *handler, n int) time.Duration {
	if h.backoff > 0 {
		return h.backoff
	}
	d := o.settings.MinBackoff
	for i := 1; i < n && d < o.settings.MaxBackoff; i++ {
		d *= 2
	}
	return min(d, o.settings.MaxBackoff)
}

// call runs fn, turning a panic into an error so that one bad handler
// cannot take the operator down.
func call(ctx context.Context, fn HandlerFunc, ev *Event) (result any, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("handler panicked: %v", r)
		}
	}()
	return fn(ctx, ev)
}
