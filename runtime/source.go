package runtime

import (
	"context"
	"strconv"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"
)

// sourceKey identifies one shared informer: a resource, a namespace ("" for
// all) and a label selector.
type sourceKey struct {
	gvr       schema.GroupVersionResource
	namespace string
	selector  string
}

// source is one shared dynamic informer that can be replaced when its watch
// stalls.
type source struct {
	key sourceKey
	op  *Operator

	mu       sync.RWMutex
	informer cache.SharedIndexInformer
	stop     chan struct{}
	// behindRV/behindSince remember the server's resourceVersion the first
	// time the informer was seen lagging behind it.
	behindRV    uint64
	behindSince time.Time
}

func (o *Operator) sourceFor(k sourceKey) *source {
	if s, ok := o.sources[k]; ok {
		return s
	}
	s := &source{key: k, op: o}
	o.sources[k] = s
	o.sourceList = append(o.sourceList, s)
	return s
}

func (s *source) newInformer() cache.SharedIndexInformer {
	tweak := func(opts *metav1.ListOptions) { opts.LabelSelector = s.key.selector }
	inf := dynamicinformer.NewFilteredDynamicInformer(s.op.dyn, s.key.gvr, s.key.namespace,
		s.op.settings.ResyncPeriod, cache.Indexers{}, tweak).Informer()
	_ = inf.SetTransform(compact)
	_ = inf.SetWatchErrorHandlerWithContext(func(_ context.Context, _ *cache.Reflector, err error) {
		s.op.log.Warn("watch failed", "resource", s.key.gvr.String(), "namespace", s.key.namespace, "err", err)
	})
	var maps []*handler
	for _, h := range s.op.handlers {
		if h.kind == kindMap && h.src == s.key {
			maps = append(maps, h)
		}
	}
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			s.op.observe(s.key.gvr, obj, false)
			s.op.mapChange(maps, watch.Added, nil, obj)
		},
		UpdateFunc: func(old, obj any) {
			s.op.observe(s.key.gvr, obj, false)
			s.op.mapChange(maps, watch.Modified, old, obj)
		},
		DeleteFunc: func(obj any) {
			s.op.observe(s.key.gvr, obj, true)
			s.op.mapChange(maps, watch.Deleted, nil, obj)
		},
	})
	for _, h := range s.op.handlers {
		if h.kind == kindEvent && h.src == s.key {
			_, _ = inf.AddEventHandler(s.op.rawEventHandler(h))
		}
	}
	return inf
}

// start runs the informer until ctx ends.
func (s *source) start(ctx context.Context) {
	inf := s.newInformer()
	stop := make(chan struct{})
	s.mu.Lock()
	s.informer, s.stop = inf, stop
	s.mu.Unlock()
	go inf.RunWithContext(stopContext(ctx, stop))
}

func stopContext(ctx context.Context, stop <-chan struct{}) context.Context {
	ctx, cancel := context.WithCancel(ctx)
	go func() {
		select {
		case <-stop:
		case <-ctx.Done():
		}
		cancel()
	}()
	return ctx
}

func (s *source) current() cache.SharedIndexInformer {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.informer
}

func (s *source) hasSynced() bool {
	inf := s.current()
	return inf != nil && inf.HasSynced()
}

func (s *source) get(namespace, name string) *unstructured.Unstructured {
	inf := s.current()
	if inf == nil {
		return nil
	}
	obj, ok, _ := inf.GetStore().GetByKey(ObjectKey(namespace, name))
	if !ok {
		return nil
	}
	return asUnstructured(obj)
}

// checkHealth compares the informer's last resourceVersion with the
// server's. A watch that has not caught up with a resourceVersion the server
// had WatchStallTimeout ago has stopped delivering (Kopf's most reported
// problem) and is replaced by a fresh informer, which lists again.
func (s *source) checkHealth(ctx context.Context) {
	inf := s.current()
	if inf == nil || !inf.HasSynced() {
		return
	}
	ri := s.op.dyn.Resource(s.key.gvr).Namespace(s.key.namespace)
	list, err := ri.List(ctx, metav1.ListOptions{LabelSelector: s.key.selector, Limit: 1})
	if err != nil {
		s.op.log.Warn("watch health check failed", "resource", s.key.gvr.String(), "err", err)
		return
	}
	server, err1 := strconv.ParseUint(list.GetResourceVersion(), 10, 64)
	have, err2 := strconv.ParseUint(inf.LastSyncResourceVersion(), 10, 64)
	if err1 != nil || err2 != nil {
		return // not an etcd-style resourceVersion: nothing to compare
	}
	now := time.Now()
	s.mu.Lock()
	switch {
	case have >= server || (s.behindRV != 0 && have >= s.behindRV):
		s.behindRV, s.behindSince = 0, time.Time{}
		if have < server {
			s.behindRV, s.behindSince = server, now
		}
	case s.behindRV == 0:
		s.behindRV, s.behindSince = server, now
	}
	stalled := s.behindRV != 0 && now.Sub(s.behindSince) >= s.op.settings.WatchStallTimeout
	s.mu.Unlock()
	if stalled {
		s.restart(ctx)
	}
}

// restart replaces the informer. The old one keeps serving lookups until the
// new one has synced; objects that vanished meanwhile are queued so that
// their daemons and index entries are cleaned up.
func (s *source) restart(ctx context.Context) {
	s.op.log.Warn("watch stalled, restarting it", "resource", s.key.gvr.String(),
		"namespace", s.key.namespace, "selector", s.key.selector)
	s.op.metrics.watchRestarts.WithLabelValues(s.key.gvr.String()).Inc()
	inf := s.newInformer()
	stop := make(chan struct{})
	go inf.RunWithContext(stopContext(ctx, stop))
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		close(stop)
		return
	}
	s.mu.Lock()
	old, oldStop := s.informer, s.stop
	s.informer, s.stop = inf, stop
	s.behindRV, s.behindSince = 0, time.Time{}
	s.mu.Unlock()
	close(oldStop)
	for _, k := range old.GetStore().ListKeys() {
		if _, ok, _ := inf.GetStore().GetByKey(k); !ok {
			ns, name, _ := cache.SplitMetaNamespaceKey(k)
			s.op.forgetIndexes(Key{Resource: s.key.gvr, Namespace: ns, Name: name})
			s.op.queue.Add(Key{Resource: s.key.gvr, Namespace: ns, Name: name})
		}
	}
}

// rawEventHandler feeds an OnEvent handler. client-go gives each handler its
// own goroutine and buffer, so a slow one delays only itself.
func (o *Operator) rawEventHandler(h *handler) cache.ResourceEventHandler {
	call := func(typ watch.EventType, obj any) {
		u := asUnstructured(obj)
		if u == nil || !h.matches(u) {
			return
		}
		key := keyOf(h.gvr, u)
		if err := h.eventFn(o.runCtx(), typ, u); err != nil {
			o.objectLogger(key).Error("event handler failed", "handler", h.id, "event", string(typ), "err", err)
		}
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { call(watch.Added, obj) },
		UpdateFunc: func(_, obj any) { call(watch.Modified, obj) },
		DeleteFunc: func(obj any) { call(watch.Deleted, obj) },
	}
}
