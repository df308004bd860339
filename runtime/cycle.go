package runtime

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// step is one handler to run in a cycle, with the cause it runs for.
type step struct {
	h        *handler
	cause    Cause
	old, new any
	diff     []DiffItem
}

// cycle is the work for one key: what was read, what ran, what to write.
type cycle struct {
	key      Key
	obj      *unstructured.Unstructured // private copy of the cached object
	store    Storage
	records  map[string]string // what store kept for obj
	st       state
	steps    []step
	deleting bool
	hasFin   bool
	needFin  bool
	last     lastHandled // the record to write once every step has finished
	changed  map[string]bool
	results  map[string]any
	patch    Patch
	wait     time.Duration // earliest delayed step
	stopped  bool          // shutdown interrupted the cycle
	enq      enqueueTake   // Enqueue requests taken by this cycle
	essence  oldNew        // see essenceChange
	// keepEssence: a matching handler needs the essence in the record
	// (WithDiff).
	keepEssence bool
}

func (c *cycle) done() bool {
	if c.stopped {
		return false
	}
	for _, s := range c.steps {
		if !c.st.progress[s.h.id].finished() {
			return false
		}
	}
	return true
}

// process handles one key: it detects the causes, runs every due handler in
// order, then writes one merged patch. It returns how long to wait before
// the key must be handled again (0: only on the next change).
func (o *Operator) process(ctx context.Context, key Key) (time.Duration, error) {
	store := o.storageFor(key)
	cached := o.lookup(key)
	if cached == nil {
		o.gone(key)
		return 0, store.Purge(ctx, key)
	}
	if wait, stale := o.isStale(key, cached); stale {
		return wait, nil
	}
	if wait, hold, err := o.settleUnsure(ctx, key, cached); hold {
		return wait, err
	}
	c := &cycle{key: key, store: store, changed: map[string]bool{}, results: map[string]any{}}
	changes, spawners, needFin := o.matching(key.Resource, cached)
	c.needFin = needFin
	c.deleting = cached.GetDeletionTimestamp() != nil
	if c.deleting {
		o.stopSpawned(key, true)
	} else {
		o.syncSpawned(key, cached, spawners)
	}
	if len(changes) == 0 && !c.needFin && !o.holdsFinalizer(key, store, cached) {
		// Stealth: an object no handler matches is never touched; state kept
		// elsewhere from when it matched is forgotten.
		o.enqueueDone(key, true)
		return 0, store.Purge(ctx, key)
	}
	c.obj = cached // lookup decoded a copy of its own
	c.records = store.Fetch(key, c.obj)
	c.st = readState(c.records)
	c.hasFin = slices.Contains(c.obj.GetFinalizers(), o.settings.Finalizer)
	c.enq = o.takeEnqueued(key)
	o.plan(c, changes)
	if err := o.finalizeFirst(ctx, c); err != nil {
		return 0, err
	}
	o.runSteps(ctx, c)
	if err := o.finish(ctx, c); err != nil {
		return 0, err
	}
	wait := c.enq.next // a later Enqueue request
	switch {
	case c.deleting:
		o.enqueueDone(key, true)
	case c.done():
		o.enqueueDone(key, false)
	case c.wait > 0 && (wait == 0 || c.wait < wait):
		wait = c.wait
	}
	return wait, nil
}

// matching returns the change handlers and spawners that match obj, and
// whether one of them needs the finalizer.
func (o *Operator) matching(gvr schema.GroupVersionResource, obj *unstructured.Unstructured) (changes, spawners []*handler, needFin bool) {
	for _, h := range o.handlers {
		if h.gvr != gvr || !h.matches(obj) {
			continue
		}
		switch h.kind {
		case kindChange:
			changes = append(changes, h)
			needFin = needFin || (h.causes.has(CauseDelete) && !h.optional)
		case kindDaemon:
			spawners = append(spawners, h)
			needFin = true
		case kindTimer:
			spawners = append(spawners, h)
		}
	}
	return changes, spawners, needFin
}

// plan picks the steps of the cycle from the object's state.
func (o *Operator) plan(c *cycle, changes []*handler) {
	rec := c.st.last
	uid := c.obj.GetUID()
	o.stateMu.Lock()
	resume := rec != nil && o.resumed[c.key] != uid
	o.stateMu.Unlock()
	add := func(h *handler, cause Cause) {
		s := step{h: h, cause: cause}
		if h.diff && (cause == CauseUpdate || cause == CauseResume) {
			// Typed nil maps would make non-nil interfaces.
			if e := c.essenceChange(o.settings.Prefix); e.new != nil {
				s.new, s.diff = e.new, e.diff
				if e.old != nil {
					s.old = e.old
				}
			}
		}
		c.steps = append(c.steps, s)
	}
	if c.deleting {
		if !c.hasFin && rec == nil {
			return
		}
		for _, h := range changes {
			switch {
			case h.causes.has(CauseDelete):
				add(h, CauseDelete)
			case h.causes.has(CauseResume) && resume && h.includeDeleted:
				add(h, CauseResume)
			}
		}
		return
	}
	c.last.Hash = essenceHash(o.settings.Prefix, c.obj)
	var cause Cause
	switch {
	case rec == nil:
		cause = CauseCreate
	case rec.Hash != c.last.Hash:
		cause = CauseUpdate
	}
	for _, h := range changes {
		c.keepEssence = c.keepEssence || h.diff
		switch {
		case h.causes.has(CauseField):
			raw, val, present := fieldValue(c.obj, h.field)
			if c.last.Fields == nil {
				c.last.Fields = map[string]json.RawMessage{}
			}
			if present {
				c.last.Fields[h.field] = raw
			}
			var prev json.RawMessage
			if rec != nil {
				prev = rec.Fields[h.field]
			}
			if cause != 0 && !bytes.Equal(prev, raw) {
				s := step{h: h, cause: cause, old: decodeJSON(prev), new: val}
				if h.diff {
					s.diff = under(c.essenceChange(o.settings.Prefix).diff, h.field)
				}
				c.steps = append(c.steps, s)
			}
		case cause != 0 && h.causes.has(cause):
			add(h, cause)
		case resume && h.causes.has(CauseResume):
			add(h, CauseResume)
		case c.enq.active && h.causes.has(CauseEnqueue):
			add(h, CauseEnqueue)
		}
	}
	if c.enq.fresh {
		wake(c)
	}
}

// runSteps runs the due steps in registration order.
func (o *Operator) runSteps(ctx context.Context, c *cycle) {
	for _, s := range c.steps {
		p := c.st.progress[s.h.id]
		if p.finished() {
			continue
		}
		if wait := o.until(time.UnixMilli(p.Delayed)); p.Delayed != 0 && wait > 0 {
			if c.wait == 0 || wait < c.wait {
				c.wait = wait
			}
			continue
		}
		if o.stopping.Load() || ctx.Err() != nil {
			c.stopped = true
			return
		}
		if !o.runStep(ctx, c, s, &p) {
			c.stopped = true
			return
		}
		c.st.progress[s.h.id] = p
		c.changed[s.h.id] = true
		if !p.finished() {
			if wait := o.until(time.UnixMilli(p.Delayed)); c.wait == 0 || wait < c.wait {
				c.wait = max(wait, time.Millisecond)
			}
		}
	}
}

// finish writes the cycle's single merged patch, if anything changed, then
// the state kept outside the object.
func (o *Operator) finish(ctx context.Context, c *cycle) error {
	done := c.done()
	changes := map[string]*string{}
	// released: the handlers made the object match none of them (a filter
	// on what they changed, or on state they removed elsewhere); its state
	// is forgotten and the finalizer goes, so that it is handled as new if
	// it matches again.
	released := false
	// slim: the record without the essence an earlier release kept, to be
	// written only with a patch that is sent anyway.
	var slim *string
	if done && !c.deleting {
		after := afterPatch(c.obj, c.patch.obj)
		hs, spawners, needFin := o.matching(c.key.Resource, after)
		released = len(hs) == 0 && len(spawners) == 0 && !needFin
		c.needFin = needFin
	}
	switch {
	case released:
		for id := range c.records {
			changes[id] = nil
		}
	case done && !c.deleting:
		for id := range c.st.progress {
			if _, ok := c.records[id]; ok {
				changes[id] = nil
			}
		}
		// Hash what the object will be after this patch, so that the
		// handlers' own changes do not look like an update.
		after := afterPatch(c.obj, c.patch.obj)
		c.last.Hash = essenceHash(o.settings.Prefix, after)
		if c.keepEssence {
			c.last.Essence = c.keptEssence(o.settings.Prefix, after)
		}
		if rec := encode(c.last); c.records[recordKey] != rec {
			if c.onlyEssenceDropped() {
				slim = &rec
			} else {
				changes[recordKey] = &rec
			}
		}
	default:
		// While deleting, finished progress stays: it is what keeps delete
		// handlers from running again once the finalizer is gone but other
		// finalizers still hold the object.
		for id := range c.changed {
			v := encode(c.st.progress[id])
			changes[id] = &v
		}
	}
	if done {
		o.stateMu.Lock()
		o.resumed[c.key] = c.obj.GetUID()
		o.stateMu.Unlock()
	}
	fin := finNone
	switch {
	case c.deleting && c.hasFin && done:
		fin = finRemove
	case !c.deleting && c.needFin && !c.hasFin:
		fin = finAdd
	case !c.deleting && !c.needFin && c.hasFin:
		fin = finRemove
	}
	onObject := c.store.Patch(c.obj, changes)
	if slim != nil && (len(changes) > 0 || len(onObject) > 0 || fin != finNone || len(c.results) > 0 || !c.patch.empty()) {
		changes[recordKey] = slim
		onObject = c.store.Patch(c.obj, changes)
	}
	if len(onObject) > 0 || fin != finNone || len(c.results) > 0 || !c.patch.empty() {
		if err := o.write(ctx, c, onObject, fin); err != nil {
			return err
		}
	}
	// A finished deletion needs no state outside the object any more: it
	// lasts no longer than the object (and none is left should the object
	// stay, held by other finalizers).
	if released || (c.deleting && done) {
		return c.store.Purge(ctx, c.key)
	}
	return c.store.Save(ctx, c.key, c.obj, changes)
}

// afterPatch returns obj with a JSON merge patch applied (only what the
// essence needs: a copy of the top-level maps it touches).
func afterPatch(obj *unstructured.Unstructured, patch map[string]any) *unstructured.Unstructured {
	if len(patch) == 0 {
		return obj
	}
	return &unstructured.Unstructured{Object: mergeInto(obj.Object, patch)}
}

func mergeInto(dst, patch map[string]any) map[string]any {
	out := make(map[string]any, len(dst)+len(patch))
	for k, v := range dst {
		out[k] = v
	}
	for k, v := range patch {
		switch pv := v.(type) {
		case nil:
			delete(out, k)
		case map[string]any:
			cur, _ := out[k].(map[string]any)
			out[k] = mergeInto(cur, pv)
		case map[string]string:
			m := make(map[string]any, len(pv))
			for kk, vv := range pv {
				m[kk] = vv
			}
			cur, _ := out[k].(map[string]any)
			out[k] = mergeInto(cur, m)
		default:
			out[k] = v
		}
	}
	return out
}

// holdsFinalizer reports whether obj carries the finalizer because this
// runtime put it there: the finalizer and records of its handling. The
// finalizer's name alone is not enough: an operator that replaces another
// may share its finalizer name (Settings.Finalizer), and an object of the
// other operator carries the same name with no record of ours. Removing it
// there would let that object go before its operator cleaned up, and fight
// its operator, which adds it back (seen with two such operators on one
// cluster: the other's status writes all conflicted, and its deleted object
// left what it managed behind). The cost: an object whose first cycle was cut
// off between the finalizer and the first record (a crash, or it stopped
// matching meanwhile) keeps the finalizer until someone removes it; a
// finalizer left is recoverable, another operator's cleanup skipped is not.
func (o *Operator) holdsFinalizer(key Key, store Storage, obj *unstructured.Unstructured) bool {
	return slices.Contains(obj.GetFinalizers(), o.settings.Finalizer) && len(store.Fetch(key, obj)) > 0
}
