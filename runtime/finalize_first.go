package runtime

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// finalizeFirst puts our finalizer on the object before any handler of the
// cycle runs, when the object needs one and lacks it. Merging it into the
// cycle's final patch instead would leave a window in which an object
// deleted right after its create handler ran (and created something outside
// the object) is gone before its delete handler can clean up. Kopf closes
// the same window the same way; it costs one extra patch, on first contact
// only.
func (o *Operator) finalizeFirst(ctx context.Context, c *cycle) error {
	if c.deleting || !c.needFin || c.hasFin || len(c.steps) == 0 {
		return nil
	}
	list, changed := o.finalizers(c.obj, finAdd)
	if !changed {
		return nil
	}
	body, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"finalizers": list,
		// Computed from this copy: on 409 the cycle is retried on a fresh one,
		// so a finalizer someone else added meanwhile is never dropped.
		"resourceVersion": c.obj.GetResourceVersion(),
	}})
	if err != nil {
		return fmt.Errorf("encode finalizer patch of %s: %w", c.key, err)
	}
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	out, err := o.send(wctx, c.key, body)
	if apierrors.IsNotFound(err) {
		c.steps = nil // gone already: nothing to create, nothing to clean up
		return nil
	}
	if err != nil {
		return o.patchFailed(c, err)
	}
	o.metrics.patches.WithLabelValues(c.key.Resource.String(), "ok").Inc()
	o.markStale(c.key, c.obj.GetResourceVersion(), out.GetResourceVersion())
	c.obj, c.hasFin = out, true
	return nil
}
