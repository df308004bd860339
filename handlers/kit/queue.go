package kit

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/util/workqueue"
)

// resyncQueue re-handles parents on changes of other objects. It is a
// client-go rate-limited workqueue: one key is never on two workers.
type resyncQueue struct {
	d     *Deps
	queue workqueue.TypedRateLimitingInterface[string]
	once  sync.Once
}

const resyncWorkers = 4

func newResyncQueue(d *Deps) *resyncQueue {
	return &resyncQueue{d: d, queue: workqueue.NewTypedRateLimitingQueueWithConfig(
		workqueue.NewTypedItemExponentialFailureRateLimiter[string](500*time.Millisecond, 5*time.Minute),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: "tailplane-resync"})}
}

func (q *resyncQueue) add(key string) { q.queue.Add(key) }

func (q *resyncQueue) addAfter(key string, d time.Duration) {
	if d <= 0 {
		q.queue.Add(key)
		return
	}
	q.queue.AddAfter(key, d)
}

// start runs the workers until ctx ends (the leader's context).
func (q *resyncQueue) start(ctx context.Context) {
	q.once.Do(func() {
		for range resyncWorkers {
			go q.work(ctx)
		}
		go func() { <-ctx.Done(); q.queue.ShutDown() }()
	})
}

func (q *resyncQueue) work(ctx context.Context) {
	for {
		key, quit := q.queue.Get()
		if quit {
			return
		}
		q.handle(ctx, key)
		q.queue.Done(key)
	}
}

func (q *resyncQueue) handle(ctx context.Context, key string) {
	parts := strings.SplitN(key, "/", 3)
	if len(parts) != 3 {
		q.queue.Forget(key)
		return
	}
	for _, fn := range q.d.syncer(parts[0]) {
		if err := safeCall(ctx, fn, parts[1], parts[2]); err != nil {
			q.d.Log.Warn("resync failed, will retry", "key", key, "err", err)
			q.queue.AddRateLimited(key)
			return
		}
	}
	q.queue.Forget(key)
}

// keyedLocks is a mutex per key, created on first use and dropped when
// nobody holds or waits for it.
type keyedLocks struct {
	mu    sync.Mutex
	locks map[string]*keyedLock
}

type keyedLock struct {
	sync.Mutex
	users int
}

func (k *keyedLocks) lock(key string) func() {
	k.mu.Lock()
	if k.locks == nil {
		k.locks = map[string]*keyedLock{}
	}
	l := k.locks[key]
	if l == nil {
		l = &keyedLock{}
		k.locks[key] = l
	}
	l.users++
	k.mu.Unlock()
	l.Lock()
	return func() {
		l.Unlock()
		k.mu.Lock()
		l.users--
		if l.users == 0 {
			delete(k.locks, key)
		}
		k.mu.Unlock()
	}
}

// safeCall runs fn, turning a panic into an error so that one bad object
// cannot take the operator down.
func safeCall(ctx context.Context, fn SyncFunc, namespace, name string) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("sync panicked: %v", r)
		}
	}()
	return fn(ctx, namespace, name)
}
