package runtime

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

type finChange int

const (
	finNone finChange = iota
	finAdd
	finRemove
)

// maxConflicts bounds how often one cycle's patch is retried on a fresh
// object after 409 Conflict.
const maxConflicts = 5

// write sends the cycle's merged patch, with the state records a Storage
// keeps on the object (onObject). A patch that changes finalizers
// carries the resourceVersion it was computed from, so that it can never
// drop a finalizer someone else added meanwhile: on 409 the object is read
// again and the finalizer list recomputed from the fresh copy.
func (o *Operator) write(ctx context.Context, c *cycle, onObject map[string]any, fin finChange) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	ri := o.dyn.Resource(c.key.Resource).Namespace(c.key.Namespace)
	body := compose(nil, c.patch.obj)
	var status map[string]any
	if len(c.results) > 0 {
		body = compose(body, nestResults(o.settings.ResultsPath, c.results))
	}
	if o.hasStatusSubresource(c.key.Resource) {
		status, _ = body["status"].(map[string]any)
		delete(body, "status")
	}
	if len(onObject) > 0 {
		body = compose(body, onObject)
	}
	if len(status) > 0 {
		b, _ := json.Marshal(map[string]any{"status": status})
		if _, err := o.send(ctx, c.key, b, "status"); err != nil {
			return o.patchFailed(c, err)
		}
	}
	cur := c.obj
	for attempt := 0; ; attempt++ {
		meta, _ := body["metadata"].(map[string]any)
		if meta == nil {
			meta = map[string]any{}
		}
		delete(meta, "finalizers")
		delete(meta, "resourceVersion")
		if list, changed := o.finalizers(cur, fin); changed {
			meta["finalizers"] = list
			meta["resourceVersion"] = cur.GetResourceVersion()
		}
		body["metadata"] = meta
		if len(meta) == 0 {
			delete(body, "metadata")
		}
		if len(body) == 0 {
			return nil
		}
		b, err := json.Marshal(body)
		if err != nil {
			return fmt.Errorf("encode patch of %s: %w", c.key, err)
		}
		out, err := o.send(ctx, c.key, b)
		if apierrors.IsConflict(err) && attempt < maxConflicts {
			o.metrics.patches.WithLabelValues(c.key.Resource.String(), "conflict").Inc()
			if cur, err = ri.Get(ctx, c.key.Name, metav1.GetOptions{}); err != nil {
				return o.readFailed(c.key, err)
			}
			continue
		}
		if err != nil {
			return o.patchFailed(c, err)
		}
		o.metrics.patches.WithLabelValues(c.key.Resource.String(), "ok").Inc()
		if out.GetResourceVersion() != c.obj.GetResourceVersion() {
			o.markStale(c.key, c.obj.GetResourceVersion(), out.GetResourceVersion())
		}
		return nil
	}
}

// patchAPI sends a merge patch to the API server (Operator.send; tests of
// the dispatch path replace it to measure without the network).
func (o *Operator) patchAPI(ctx context.Context, k Key, body []byte, subresources ...string) (*unstructured.Unstructured, error) {
	return o.dyn.Resource(k.Resource).Namespace(k.Namespace).Patch(ctx, k.Name, types.MergePatchType, body, metav1.PatchOptions{}, subresources...)
}

// finalizers returns obj's finalizer list with ours added or removed, and
// whether that differs from the current list. Others' finalizers are kept
// as they are, and none is added to an object already being deleted (the
// API server forbids it).
func (o *Operator) finalizers(obj *unstructured.Unstructured, fin finChange) ([]string, bool) {
	list := obj.GetFinalizers()
	has := slices.Contains(list, o.settings.Finalizer)
	switch {
	case fin == finAdd && !has && obj.GetDeletionTimestamp() == nil:
		return append(slices.Clone(list), o.settings.Finalizer), true
	case fin == finRemove && has:
		out := make([]string, 0, len(list))
		for _, f := range list {
			if f != o.settings.Finalizer {
				out = append(out, f)
			}
		}
		return out, true
	}
	return list, false
}

// patchFailed accounts for a failed write of cycle c. A failure whose
// outcome is unknown marks the key unsure, so that the retry learns from
// the API server whether the write landed before it runs any handler.
func (o *Operator) patchFailed(c *cycle, err error) error {
	if !apierrors.IsNotFound(err) && outcomeUnknown(err) {
		o.markUnsure(c.key, c.obj)
	}
	return o.readFailed(c.key, err)
}

// readFailed accounts for a failed read or write of k.
func (o *Operator) readFailed(k Key, err error) error {
	if apierrors.IsNotFound(err) {
		o.metrics.patches.WithLabelValues(k.Resource.String(), "gone").Inc()
		o.objectLogger(k).Debug("object gone before its patch")
		return nil
	}
	o.metrics.patches.WithLabelValues(k.Resource.String(), "error").Inc()
	return fmt.Errorf("patch %s: %w", k, err)
}

// compose merges patch b into patch a (b wins), keeping nulls: they
// delete fields when the patch is applied.
func compose(a, b map[string]any) map[string]any {
	out := make(map[string]any, len(a)+len(b))
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		bm, bok := v.(map[string]any)
		am, aok := out[k].(map[string]any)
		if bok && aok {
			out[k] = compose(am, bm)
		} else if bok {
			out[k] = compose(nil, bm)
		} else {
			out[k] = v
		}
	}
	return out
}

// nestResults puts results under the dotted results path.
func nestResults(path string, results map[string]any) map[string]any {
	fields := splitPath(path)
	var out any = results
	for i := len(fields) - 1; i >= 0; i-- {
		out = map[string]any{fields[i]: out}
	}
	return out.(map[string]any)
}

func (o *Operator) hasStatusSubresource(gvr schema.GroupVersionResource) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.statusSub[gvr]
}

// markStale records the resourceVersions before and after an own patch:
// until the informer delivers the patched version, the cache is stale.
func (o *Operator) markStale(k Key, before, after string) {
	o.stateMu.Lock()
	o.stale[k] = staleMark{before: before, after: after, until: o.settings.Clock.Now().Add(o.settings.ConsistencyTimeout)}
	o.stateMu.Unlock()
}

// isStale reports whether obj predates the last own patch: handling it
// would re-run handlers whose success is not in the cache yet. The watch event of the patch queues the key again; the
// returned wait is a safety net.
func (o *Operator) isStale(k Key, obj *unstructured.Unstructured) (time.Duration, bool) {
	o.stateMu.Lock()
	defer o.stateMu.Unlock()
	m, ok := o.stale[k]
	if !ok {
		return 0, false
	}
	if o.settings.Clock.Now().After(m.until) || !m.older(obj.GetResourceVersion()) {
		delete(o.stale, k)
		return 0, false
	}
	return o.until(m.until), true
}

// gone forgets an object that left the cache.
func (o *Operator) gone(k Key) {
	o.stopSpawned(k, false)
	o.enqueueDone(k, true)
	o.stateMu.Lock()
	delete(o.stale, k)
	delete(o.unsure, k)
	delete(o.resumed, k)
	o.stateMu.Unlock()
	o.queue.Forget(k)
}

func decodeJSON(raw json.RawMessage) any {
	if raw == nil {
		return nil
	}
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return nil
	}
	return v
}
