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
// client-go rate-limited workqueue: one key is never on two workers. Each
// term of leadership runs its own queue (start), since a shut-down
// workqueue cannot be restarted.
type resyncQueue struct {
	d     *Deps
	mu    sync.Mutex
	queue workqueue.TypedRateLimitingInterface[string]
}

const resyncWorkers = 4

func newResyncQueue(d *Deps) *resyncQueue {
	return &resyncQueue{d: d, queue: newResyncWorkqueue()}
}

func newResyncWorkqueue() workqueue.TypedRateLimitingInterface[string] {
	return workqueue.NewTypedRateLimitingQueueWithConfig(
		workqueue.NewTypedItemExponentialFailureRateLimiter[string](500*time.Millisecond, 5*time.Minute),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: "tailplane-resync"})
}

func (q *resyncQueue) current() workqueue.TypedRateLimitingInterface[string] {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.queue
}

func (q *resyncQueue) add(key string) { q.current().Add(key) }

func (q *resyncQueue) addAfter(key string, d time.Duration) {
	if d <= 0 {
		q.current().Add(key)
		return
	}
	q.current().AddAfter(key, d)
}

// start runs the workers until ctx ends (the leader's context of one term).
func (q *resyncQueue) start(ctx context.Context) {
	q.mu.Lock()
	if q.queue.ShuttingDown() {
		q.queue = newResyncWorkqueue()
	}
	wq := q.queue
	q.mu.Unlock()
	for range resyncWorkers {
		go q.work(ctx, wq)
	}
	go func() { <-ctx.Done(); wq.ShutDown() }()
}

func (q *resyncQueue) work(ctx context.Context, wq workqueue.TypedRateLimitingInterface[string]) {
	for {
		key, quit := wq.Get()
		if quit {
			return
		}
		q.handle(ctx, wq, key)
		wq.Done(key)
	}
}

func (q *resyncQueue) handle(ctx context.Context, wq workqueue.TypedRateLimitingInterface[string], key string) {
	parts := strings.SplitN(key, "/", 3)
	if len(parts) != 3 {
		wq.Forget(key)
		return
	}
	for _, fn := range q.d.syncer(parts[0]) {
		if err := safeCall(ctx, fn, parts[1], parts[2]); err != nil {
			q.d.Log.Warn("resync failed, will retry", "key", key, "err", err)
			wq.AddRateLimited(key)
			return
		}
	}
	wq.Forget(key)
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
