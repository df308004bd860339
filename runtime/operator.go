package runtime

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/charmbracelet/log"
	"golang.org/x/time/rate"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
)

// Key identifies one object in the workqueue.
type Key struct {
	Resource  schema.GroupVersionResource
	Namespace string
	Name      string
}

// ObjectKey is the key of the object namespace/name in the runtime's
// informer caches and indexes, and in Enqueue: "namespace/name", or the name
// alone of a cluster-scoped object (namespace ""); the format of client-go's
// cache.MetaNamespaceKeyFunc, which the caches use.
func ObjectKey(namespace, name string) string {
	if namespace == "" {
		return name
	}
	return namespace + "/" + name
}

// ObjectKey is k's object's cache key (ObjectKey), without the resource.
func (k Key) ObjectKey() string { return ObjectKey(k.Namespace, k.Name) }

// String names k in logs: "resource.group/namespace/name".
func (k Key) String() string {
	res := k.Resource.Resource
	if k.Resource.Group != "" {
		res += "." + k.Resource.Group
	}
	if k.Namespace == "" {
		return res + "/" + k.Name
	}
	return res + "/" + k.Namespace + "/" + k.Name
}

func keyOf(gvr schema.GroupVersionResource, obj *unstructured.Unstructured) Key {
	return Key{Resource: gvr, Namespace: obj.GetNamespace(), Name: obj.GetName()}
}

// Operator holds the registered handlers and runs them. Create it with New,
// register handlers, then call Run once.
type Operator struct {
	settings Settings
	dyn      dynamic.Interface
	kube     kubernetes.Interface
	log      *log.Logger
	queue    *termQueue
	metrics  *metrics
	recorder record.EventRecorder
	// eventQueue feeds postEvents; eventsDone stops it.
	eventQueue chan pending
	eventsDone chan struct{}
	events     record.EventBroadcaster
	send       func(ctx context.Context, k Key, body []byte, subresources ...string) (*unstructured.Unstructured, error)

	mu         sync.Mutex // guards registration
	errs       []error
	handlers   []*handler
	sources    map[sourceKey]*source
	sourceList []*source
	indexes    map[string]*Index
	probes     map[string]ProbeFunc
	startup    []Hook
	jobs       []job
	cleanup    []Hook
	statusSub  map[schema.GroupVersionResource]bool
	// storages are the resources' Store options; storageStarts the
	// storages whose Start is a startup hook.
	storages      map[schema.GroupVersionResource]Storage
	storageStarts []Storage

	stateMu sync.Mutex // guards the maps below
	stale   map[Key]staleMark
	// unsure holds keys whose last write ended without a definite answer,
	// with the resourceVersion it was computed from (see settleUnsure).
	unsure  map[Key]string
	resumed map[Key]types.UID // objects whose resume handlers ran in this process
	spawned map[Key]*spawned
	// enqueued holds the Enqueue requests not yet finished.
	enqueued map[Key]*enqueued

	ctx      atomic.Pointer[context.Context] // the active run's context
	ran      atomic.Bool
	stopping atomic.Bool
	synced   atomic.Bool
	leading  atomic.Bool
	// failed is set when a term of leadership ended with an error that ends
	// Run (a startup hook failed): the replica is going away, not a standby.
	failed atomic.Bool
}

// staleMark remembers the resourceVersions around an own patch.
type staleMark struct {
	before, after string
	until         time.Time
}

// older reports whether rv predates the patch. Kubernetes resourceVersions
// are opaque, but etcd's are increasing integers: when both parse, a version
// lower than the patched one (for instance a change made by someone else
// while the handler ran) is stale too.
func (m staleMark) older(rv string) bool {
	if rv == m.before {
		return true
	}
	cur, err1 := strconv.ParseUint(rv, 10, 64)
	after, err2 := strconv.ParseUint(m.after, 10, 64)
	return err1 == nil && err2 == nil && cur < after
}

// New returns an Operator for the cluster of cfg. Settings left zero get
// their defaults.
func New(cfg *rest.Config, s Settings) (*Operator, error) {
	s = s.withDefaults()
	if errs := validation.IsDNS1123Subdomain(s.Prefix); len(errs) > 0 {
		return nil, fmt.Errorf("runtime: prefix %q: %v", s.Prefix, errs)
	}
	if errs := validation.IsQualifiedName(s.Finalizer); len(errs) > 0 {
		return nil, fmt.Errorf("runtime: finalizer %q: %v", s.Finalizer, errs)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("runtime: dynamic client: %w", err)
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("runtime: clientset: %w", err)
	}
	o := &Operator{
		settings:  s,
		dyn:       dyn,
		kube:      kube,
		log:       s.Logger,
		sources:   map[sourceKey]*source{},
		indexes:   map[string]*Index{},
		probes:    map[string]ProbeFunc{},
		statusSub: map[schema.GroupVersionResource]bool{},
		stale:     map[Key]staleMark{},
		unsure:    map[Key]string{},
		resumed:   map[Key]types.UID{},
		spawned:   map[Key]*spawned{},
		enqueued:  map[Key]*enqueued{},
	}
	limiter := workqueue.NewTypedMaxOfRateLimiter(
		workqueue.NewTypedItemExponentialFailureRateLimiter[Key](s.MinBackoff, s.MaxBackoff),
		// An overall bucket so that a storm of failures cannot flood the API server.
		&workqueue.TypedBucketRateLimiter[Key]{Limiter: rate.NewLimiter(rate.Limit(50), 200)},
	)
	o.queue = newTermQueue(func() workqueue.TypedRateLimitingInterface[Key] {
		return workqueue.NewTypedRateLimitingQueueWithConfig(limiter, workqueue.TypedRateLimitingQueueConfig[Key]{Name: "runtime", Clock: s.Clock})
	})
	o.send = o.patchAPI
	o.startStorage(s.Storage)
	o.metrics = newMetrics(o)
	o.events, o.recorder = newRecorder(kube, s.Component)
	o.eventQueue, o.eventsDone = make(chan pending, 1000), make(chan struct{})
	go o.postEvents(o.eventsDone)
	return o, nil
}

// Err returns the registration errors so far (bad ids, paths, selectors).
// Run returns them too, before it starts anything.
func (o *Operator) Err() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	return errors.Join(o.errs...)
}

// GetIndex returns the index registered under name, or nil.
func (o *Operator) GetIndex(name string) *Index {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.indexes[name]
}

// Ready reports whether every informer has synced (or, with leader election,
// whether this replica is a healthy standby); never once a failed startup
// is ending Run.
func (o *Operator) Ready() bool {
	if o.failed.Load() {
		return false
	}
	if o.settings.LeaderElection != nil && !o.leading.Load() {
		return true
	}
	return o.synced.Load()
}

// Leading reports whether this replica is the active one (always true
// without leader election once Run started).
func (o *Operator) Leading() bool { return o.leading.Load() }

func (o *Operator) runCtx() context.Context {
	if p := o.ctx.Load(); p != nil {
		return *p
	}
	return context.Background()
}

// objectLogger returns a logger that puts the object's key on every line.
func (o *Operator) objectLogger(k Key) *log.Logger { return o.log.With("key", k.String()) }

// lookup returns a fresh copy of the cached object of a key (nil: not
// cached); callers may modify it.
func (o *Operator) lookup(k Key) *unstructured.Unstructured {
	for _, s := range o.sourceList {
		if s.key.gvr == k.Resource {
			if obj := s.get(k.Namespace, k.Name); obj != nil {
				return obj
			}
		}
	}
	return nil
}

// observe is called by informers for every change: it updates the indexes
// first (so they are complete before handlers run) and queues the key.
func (o *Operator) observe(gvr schema.GroupVersionResource, raw any, deleted bool) {
	namespace, name, ok := cachedKey(raw)
	if !ok {
		return
	}
	key := Key{Resource: gvr, Namespace: namespace, Name: name}
	var obj *unstructured.Unstructured // decoded for index handlers only
	queued := false
	for _, h := range o.handlers {
		if h.gvr != gvr {
			continue
		}
		switch h.kind {
		case kindIndex:
			if obj == nil && !deleted {
				if obj = asUnstructured(raw); obj == nil {
					continue
				}
			}
			var entries map[string]any
			if !deleted && h.matches(obj) {
				entries = h.indexFn(obj)
			}
			o.indexes[h.id].set(key.String(), entries)
		case kindChange, kindTimer, kindDaemon:
			if !queued {
				o.queue.Add(key)
				queued = true
			}
		}
	}
}

func (o *Operator) forgetIndexes(k Key) {
	for _, h := range o.handlers {
		if h.kind == kindIndex && h.gvr == k.Resource {
			o.indexes[h.id].set(k.String(), nil)
		}
	}
}
