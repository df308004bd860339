package runtime

import (
	"fmt"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
)

// MapFunc maps a change of a watched object to the keys of the objects to
// handle again (controller-runtime's Watches with a map function). typ is
// the watch event; old is the previous state on watch.Modified, else nil.
// It runs on the watch's goroutine, so it must be quick and must not block
// (read indexes, not the API server), and it must not modify the objects:
// they are the informer's cached copies.
type MapFunc func(typ watch.EventType, old, obj *unstructured.Unstructured) []Key

// Watch watches gvr with the shared informer of its scope (Namespace,
// Selector; filters apply to the new or, on a change or deletion, the old
// state) and, for every change, enqueues the keys fn returns, as Enqueue
// does with no delay.
func (o *Operator) Watch(gvr schema.GroupVersionResource, id string, fn MapFunc, opts ...Option) error {
	return o.register(&handler{kind: kindMap, gvr: gvr, id: id, mapFn: fn}, opts)
}

// Enqueue queues an object, by resource and cache key ("namespace/name",
// or "name" when cluster-scoped), to be handled again after the given delay
// through the same queue, retries, progress records, metrics and Events as
// its own changes: its handlers registered for CauseEnqueue (see On and
// Causes) run in its next cycle, with Event.Cause CauseEnqueue unless a
// change of the object's own is handled in the same cycle.
//
// An Enqueue is news that something the handlers depend on changed: those
// handlers run even if they already succeeded in an unfinished cycle, and a
// retry delay they are waiting out (Temporary, backoff) is cut short. A
// handler that then fails is retried as usual (a Temporary delay is
// honoured). The request lives in memory only: after a restart, resume
// handlers take its place. Enqueues of an object being deleted, gone, or
// matched by no CauseEnqueue handler do nothing.
func (o *Operator) Enqueue(resource schema.GroupVersionResource, key string, after time.Duration) {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil || name == "" {
		o.log.Warn("enqueue of a malformed key ignored", "resource", resource.String(), "key", key, "err", err)
		return
	}
	o.enqueue(Key{Resource: resource, Namespace: ns, Name: name}, after)
}

func (o *Operator) enqueue(k Key, after time.Duration) {
	after = max(after, 0)
	o.stateMu.Lock()
	e := o.enqueued[k]
	if e == nil {
		e = &enqueued{}
		o.enqueued[k] = e
	}
	now := o.settings.Clock.Now()
	due := now.Add(after)
	// Requests due by now collapse into one; later ones are kept apart so
	// that each still runs when its time comes.
	if !slices.ContainsFunc(e.due, func(d time.Time) bool { return d.Equal(due) || (after == 0 && !d.After(now)) }) {
		e.due = append(e.due, due)
	}
	o.stateMu.Unlock()
	o.metrics.enqueued.WithLabelValues(k.Resource.String()).Inc()
	if after == 0 {
		o.queue.Add(k)
	} else {
		o.queue.AddAfter(k, after)
	}
}

// enqueued is the in-memory Enqueue state of one key.
type enqueued struct {
	due    []time.Time // requests not yet taken by a cycle
	active bool        // a taken request whose cycle has not finished
}

// enqueueTake is what a cycle learns from the Enqueue state.
type enqueueTake struct {
	active bool          // CauseEnqueue handlers are due
	fresh  bool          // a request arrived since the last cycle: cut delays short
	next   time.Duration // until the earliest request not yet due (0: none)
}

// takeEnqueued consumes the requests of k that are due.
func (o *Operator) takeEnqueued(k Key) enqueueTake {
	o.stateMu.Lock()
	defer o.stateMu.Unlock()
	e := o.enqueued[k]
	if e == nil {
		return enqueueTake{}
	}
	now := o.settings.Clock.Now()
	var t enqueueTake
	kept := e.due[:0]
	for _, d := range e.due {
		if d.After(now) {
			kept = append(kept, d)
			if wait := d.Sub(now); t.next == 0 || wait < t.next {
				t.next = wait
			}
			continue
		}
		t.fresh = true
	}
	e.due = kept
	e.active = e.active || t.fresh
	t.active = e.active
	return t
}

// enqueueDone ends the Enqueue cycle of k (its handlers all finished), or
// drops every request when the object is gone or being deleted (drop).
func (o *Operator) enqueueDone(k Key, drop bool) {
	o.stateMu.Lock()
	defer o.stateMu.Unlock()
	e := o.enqueued[k]
	if e == nil {
		return
	}
	e.active = false
	if drop || len(e.due) == 0 {
		delete(o.enqueued, k)
	}
}

// wake applies a fresh Enqueue to the planned steps: the CauseEnqueue
// handlers run in this cycle even if they already finished in it or are
// waiting out a retry delay. Their attempts and start time are kept, so
// that Retries and Timeout still bound them.
func wake(c *cycle) {
	for _, s := range c.steps {
		if !s.h.causes.has(CauseEnqueue) {
			continue
		}
		p := c.st.progress[s.h.id]
		if p.finished() {
			p = progress{}
		}
		p.Delayed = 0
		c.st.progress[s.h.id] = p
	}
}

// mapChange feeds the Watch handlers of one informer.
func (o *Operator) mapChange(maps []*handler, typ watch.EventType, oldRaw, raw any) {
	if len(maps) == 0 {
		return
	}
	obj := asUnstructured(raw)
	if obj == nil {
		return
	}
	old := asUnstructured(oldRaw)
	for _, h := range maps {
		if !h.matches(obj) && (old == nil || !h.matches(old)) {
			continue
		}
		keys, err := callMap(h.mapFn, typ, old, obj)
		if err != nil {
			o.objectLogger(keyOf(h.gvr, obj)).Error("watch mapping failed", "handler", h.id, "err", err)
			continue
		}
		for _, k := range keys {
			o.enqueue(k, 0)
		}
	}
}

func callMap(fn MapFunc, typ watch.EventType, old, obj *unstructured.Unstructured) (keys []Key, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("map function panicked: %v", r)
		}
	}()
	return fn(typ, old, obj), nil
}
