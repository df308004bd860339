package runtime

import (
	"context"
	"fmt"
	"regexp"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
)

// HandlerFunc handles one cause for one object. A non-nil result is written
// to <ResultsPath>.<handler id> in the cycle's patch. Return Temporary or
// Permanent to control retries; any other error is retried with backoff.
type HandlerFunc func(ctx context.Context, ev *Event) (any, error)

// DaemonFunc runs for as long as its object exists and matches. Its context
// is cancelled when the object is deleted, stops matching, or the operator
// stops. Returning nil ends it for this object; an error restarts it after
// backoff.
type DaemonFunc func(ctx context.Context, ev *Event) error

// EventFunc receives every raw watch event of a resource. It keeps no state
// and is not retried: errors are logged.
type EventFunc func(ctx context.Context, typ watch.EventType, obj *unstructured.Unstructured) error

// IndexFunc maps an object to index entries (key -> value). It runs on the
// watch's goroutine, so it must be quick. Returning nil puts the object in no
// entry.
type IndexFunc func(obj *unstructured.Unstructured) map[string]any

// ProbeFunc reports a value for /healthz; an error fails the probe.
type ProbeFunc func(ctx context.Context) (any, error)

// Hook runs at startup (before any watch; an error stops Run) or at cleanup.
type Hook func(ctx context.Context) error

// Option adjusts one registration: filters, retries, timers, watch scope.
type Option func(*handler)

type handlerKind int

const (
	kindChange handlerKind = iota
	kindEvent
	kindTimer
	kindDaemon
	kindIndex
	kindMap
)

// handler is one registration.
type handler struct {
	id       string
	kind     handlerKind
	causes   causeSet // for kindChange; {CauseField} with field != "" is OnField
	gvr      schema.GroupVersionResource
	src      sourceKey
	selector labels.Selector
	preds    []Predicate
	field    string

	fn       HandlerFunc
	daemonFn DaemonFunc
	eventFn  EventFunc
	indexFn  IndexFunc
	mapFn    MapFunc

	optErrs []error // from options, reported at registration
	storage Storage // the Store option

	optional       bool
	includeDeleted bool
	diff           bool // WithDiff: Old, New and Diff from the stored essence
	retries        int
	timeout        time.Duration
	backoff        time.Duration
	interval       time.Duration
	initialDelay   time.Duration
	idle           time.Duration
}

// matches reports whether obj is in the handler's watch scope and passes
// its filters.
func (h *handler) matches(obj *unstructured.Unstructured) bool {
	if h.src.namespace != "" && obj.GetNamespace() != h.src.namespace {
		return false
	}
	if h.selector != nil && !h.selector.Matches(labels.Set(obj.GetLabels())) {
		return false
	}
	for _, p := range h.preds {
		if !p(obj) {
			return false
		}
	}
	return true
}

// Namespace limits the watch to one namespace.
func Namespace(ns string) Option { return func(h *handler) { h.src.namespace = ns } }

// Selector limits the watch to objects matching a label selector
// ("app=web,tier!=db"); handlers with the same resource, namespace and
// selector share one informer.
func Selector(selector string) Option { return func(h *handler) { h.src.selector = selector } }

// Label filters on a label: want is a Matcher (Present(), Absent(),
// MatchFunc(...)) or a value that must be equal.
func Label(key string, want any) Option { return When(HasLabel(key, want)) }

// Annotation filters on an annotation like Label.
func Annotation(key string, want any) Option { return When(HasAnnotation(key, want)) }

// Field filters on the value at a dotted field path like Label.
func Field(path string, want any) Option {
	return func(h *handler) {
		if err := validPath(path); err != nil {
			h.optErrs = append(h.optErrs, err)
		}
		h.preds = append(h.preds, HasField(path, want))
	}
}

// When adds predicates that must all match (see And, Or, Not).
func When(ps ...Predicate) Option { return func(h *handler) { h.preds = append(h.preds, ps...) } }

// Retries limits the attempts of a handler; once used up, it fails
// permanently with ErrRetriesExceeded.
func Retries(n int) Option { return func(h *handler) { h.retries = n } }

// Timeout limits a handler's total time since its first attempt; each
// attempt's context ends at that deadline, after which the handler fails
// permanently with ErrTimeout.
func Timeout(d time.Duration) Option { return func(h *handler) { h.timeout = d } }

// Backoff replaces the exponential backoff with a fixed delay between
// attempts after plain errors.
func Backoff(d time.Duration) Option { return func(h *handler) { h.backoff = d } }

// Optional makes a delete handler best-effort: it adds no finalizer.
func Optional() Option { return func(h *handler) { h.optional = true } }

// WithDiff gives an update or resume handler the last handled and the
// current essence of the object and their differences (Event.Old, New and
// Diff), and an OnField handler the differences at or below its field. It
// costs a copy of each handled object's essence, up to MaxEssence, in its
// last-handled record (on the object with AnnotationStorage, in memory and
// in a ConfigMap with ConfigMapStorage), and encoding it in every cycle
// that handles a change. Without it, changes are detected by the
// essence's hash alone, Old, New and Diff are nil, and an OnField handler
// still gets its field's old and new values.
func WithDiff() Option { return func(h *handler) { h.diff = true } }

// IncludeDeleted lets a resume handler run for objects already being deleted.
func IncludeDeleted() Option { return func(h *handler) { h.includeDeleted = true } }

// InitialDelay delays a timer's first tick or a daemon's start.
func InitialDelay(d time.Duration) Option { return func(h *handler) { h.initialDelay = d } }

// Idle makes a timer tick only once the object has been unchanged this long.
func Idle(d time.Duration) Option { return func(h *handler) { h.idle = d } }

var validID = regexp.MustCompile(`^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$`)

// OnCreate runs fn once for each new object (one without a last-handled record).
func (o *Operator) OnCreate(gvr schema.GroupVersionResource, id string, fn HandlerFunc, opts ...Option) error {
	return o.register(&handler{kind: kindChange, causes: causesOf(CauseCreate), gvr: gvr, id: id, fn: fn}, opts)
}

// OnUpdate runs fn when an object's essence (everything but status and
// system metadata) differs from the last handled one. With WithDiff,
// Event.Old, New and Diff hold the last handled essence, the current one
// and the differences.
func (o *Operator) OnUpdate(gvr schema.GroupVersionResource, id string, fn HandlerFunc, opts ...Option) error {
	return o.register(&handler{kind: kindChange, causes: causesOf(CauseUpdate), gvr: gvr, id: id, fn: fn}, opts)
}

// OnDelete runs fn when an object is being deleted. Unless Optional, a
// finalizer holds the object until fn has finished.
func (o *Operator) OnDelete(gvr schema.GroupVersionResource, id string, fn HandlerFunc, opts ...Option) error {
	return o.register(&handler{kind: kindChange, causes: causesOf(CauseDelete), gvr: gvr, id: id, fn: fn}, opts)
}

// OnResume runs fn once per process for every object an earlier run already
// handled, i.e. after an operator restart.
func (o *Operator) OnResume(gvr schema.GroupVersionResource, id string, fn HandlerFunc, opts ...Option) error {
	return o.register(&handler{kind: kindChange, causes: causesOf(CauseResume), gvr: gvr, id: id, fn: fn}, opts)
}

// OnField runs fn when the value at a dotted field path appears or changes;
// Event.Old and Event.New hold the previous and current values and, with
// WithDiff, Event.Diff the essence's differences at or below the field.
func (o *Operator) OnField(gvr schema.GroupVersionResource, id, path string, fn HandlerFunc, opts ...Option) error {
	return o.register(&handler{kind: kindChange, causes: causesOf(CauseField), gvr: gvr, id: id, fn: fn, field: path}, opts)
}

// OnEvent calls fn for every raw watch event (ADDED, MODIFIED, DELETED).
func (o *Operator) OnEvent(gvr schema.GroupVersionResource, id string, fn EventFunc, opts ...Option) error {
	return o.register(&handler{kind: kindEvent, gvr: gvr, id: id, eventFn: fn}, opts)
}

// Timer calls fn every interval for each matching object. Its result is
// patched into <ResultsPath>.<id>. A failed tick is retried like a
// handler's attempt (a Temporary error after its delay, other errors after
// the backoff, never later than the next tick; a Permanent error or used-up
// Retries wait for the next tick), with Events and metrics.
func (o *Operator) Timer(gvr schema.GroupVersionResource, id string, interval time.Duration, fn HandlerFunc, opts ...Option) error {
	return o.register(&handler{kind: kindTimer, gvr: gvr, id: id, fn: fn, interval: interval}, opts)
}

// Daemon runs fn in a goroutine per matching object. Objects with a daemon
// carry the finalizer so that the daemon is stopped before they go away.
func (o *Operator) Daemon(gvr schema.GroupVersionResource, id string, fn DaemonFunc, opts ...Option) error {
	return o.register(&handler{kind: kindDaemon, gvr: gvr, id: id, daemonFn: fn}, opts)
}

// Index maintains an in-memory index named id over the resource, filled
// before any other handler runs. Read it with Operator.Index or Event.Index.
func (o *Operator) Index(gvr schema.GroupVersionResource, id string, fn IndexFunc, opts ...Option) error {
	return o.register(&handler{kind: kindIndex, gvr: gvr, id: id, indexFn: fn}, opts)
}

// OnStartup runs fn before any watch starts; an error stops Run. With
// leader election it runs at the start of every term of leadership.
func (o *Operator) OnStartup(fn Hook) { o.mu.Lock(); o.startup = append(o.startup, fn); o.mu.Unlock() }

// OnCleanup runs fn during a graceful shutdown, within ShutdownTimeout,
// and at the end of every term of leadership.
func (o *Operator) OnCleanup(fn Hook) { o.mu.Lock(); o.cleanup = append(o.cleanup, fn); o.mu.Unlock() }

// OnProbe adds a value to /healthz; a probe that errors makes it fail.
func (o *Operator) OnProbe(id string, fn ProbeFunc) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if _, dup := o.probes[id]; dup || !validID.MatchString(id) {
		err := fmt.Errorf("probe %q: id must be unique and match %s", id, validID)
		o.errs = append(o.errs, err)
		return err
	}
	o.probes[id] = fn
	return nil
}

// register adds h. An invalid registration is refused: its error is
// returned here and kept for Err and Run, so that callers may check each
// registration or only Run's error.
func (o *Operator) register(h *handler, opts []Option) error {
	for _, opt := range opts {
		opt(h)
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if err := o.validate(h); err != nil {
		err = fmt.Errorf("%s handler %q: %w", h.gvr.Resource, h.id, err)
		o.errs = append(o.errs, err)
		return err
	}
	if err := o.bindStorage(h); err != nil {
		err = fmt.Errorf("%s handler %q: %w", h.gvr.Resource, h.id, err)
		o.errs = append(o.errs, err)
		return err
	}
	h.src.gvr = h.gvr
	if h.src.selector != "" {
		h.selector, _ = labels.Parse(h.src.selector)
	}
	o.handlers = append(o.handlers, h)
	o.sourceFor(h.src)
	if h.kind == kindIndex {
		o.indexes[h.id] = newIndex()
	}
	return nil
}

func (o *Operator) validate(h *handler) error {
	switch {
	case h.gvr.Resource == "" || h.gvr.Version == "":
		return fmt.Errorf("resource %v needs a version and a resource name", h.gvr)
	case !validID.MatchString(h.id) || h.id == recordKey:
		return fmt.Errorf("id must match %s (and not be %q)", validID, recordKey)
	case h.fn == nil && h.daemonFn == nil && h.eventFn == nil && h.indexFn == nil && h.mapFn == nil:
		return fmt.Errorf("function is nil")
	case h.kind == kindTimer && h.interval <= 0:
		return fmt.Errorf("timer interval must be positive, got %s", h.interval)
	case h.retries < 0 || h.timeout < 0 || h.backoff < 0 || h.initialDelay < 0 || h.idle < 0:
		return fmt.Errorf("retries, timeout, backoff, initial delay and idle must not be negative")
	case o.ran.Load():
		return fmt.Errorf("registered after Run started: register every handler before Run")
	}
	if len(h.optErrs) > 0 {
		return h.optErrs[0]
	}
	switch {
	case h.kind == kindChange && h.causes == 0:
		return fmt.Errorf("no cause: On needs Causes(...)")
	case h.kind != kindChange && h.causes != 0,
		h.causes.has(CauseField) && h.causes != causesOf(CauseField):
		return fmt.Errorf("the Causes option applies to On, OnCreate, OnUpdate, OnDelete and OnResume only")
	}
	if h.diff && !h.causes.has(CauseUpdate) && !h.causes.has(CauseResume) && !h.causes.has(CauseField) {
		return fmt.Errorf("WithDiff applies to update, resume and field handlers only")
	}
	if h.causes.has(CauseField) {
		if err := validPath(h.field); err != nil {
			return err
		}
	}
	if h.src.selector != "" {
		if _, err := labels.Parse(h.src.selector); err != nil {
			return fmt.Errorf("selector %q: %w", h.src.selector, err)
		}
	}
	for _, other := range o.handlers {
		if other.gvr == h.gvr && other.id == h.id {
			return fmt.Errorf("id already registered for %s", h.gvr.Resource)
		}
	}
	return nil
}
