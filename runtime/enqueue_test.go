package runtime_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/tailplane/tailplane/internal/testpoll"
	"github.com/tailplane/tailplane/runtime"
)

// attempt is one handler run as a test saw it.
type attempt struct {
	at    time.Time
	cause runtime.Cause
	retry int
}

// attempts records handler runs for a test.
type attempts struct {
	mu  sync.Mutex
	all []attempt
}

func (a *attempts) add(ev *runtime.Event) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.all = append(a.all, attempt{at: time.Now(), cause: ev.Cause, retry: ev.Retry})
	return len(a.all)
}

func (a *attempts) list() []attempt {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]attempt(nil), a.all...)
}

// handled waits until the runtime wrote its last-handled record on the
// object, i.e. its first cycle is over.
func handled(t *testing.T, gvr schema.GroupVersionResource, ns, name string) {
	t.Helper()
	testpoll.UntilTrue(t, 20*time.Second, name+" handled", func() bool {
		return get(t, gvr, ns, name).GetAnnotations()["runtime.tailplane.io/last-handled"] != ""
	})
}

// A handler run through Enqueue that returns Temporary(err, d) is retried
// after d (not on the much shorter default backoff), with a progress record
// on the object, a HandlerRetrying Event, then its result.
func TestEnqueueHonoursTemporary(t *testing.T) {
	gvr := newCRD(t, false)
	ns := env.Namespace(t)
	const delay = 1500 * time.Millisecond
	var seen attempts
	op := newOperator(t, testSettings()) // default backoff 50ms
	if err := op.On(gvr, "poke", func(_ context.Context, ev *runtime.Event) (any, error) {
		if seen.add(ev) == 1 {
			return nil, runtime.Temporary(errors.New("not yet"), delay)
		}
		return "poked", nil
	}, runtime.Causes(runtime.CauseEnqueue)); err != nil {
		t.Fatal(err)
	}
	start(t, op)
	create(t, gvr, widget(ns, "w1", nil, nil))
	handled(t, gvr, ns, "w1")
	if n := len(seen.list()); n != 0 {
		t.Fatalf("an enqueue-only handler ran %d times before any Enqueue", n)
	}
	op.Enqueue(gvr, ns+"/w1", 0)
	testpoll.UntilTrue(t, 20*time.Second, "progress record of the delayed retry", func() bool {
		return strings.Contains(get(t, gvr, ns, "w1").GetAnnotations()["runtime.tailplane.io/poke"], `"d":`)
	})
	testpoll.UntilTrue(t, 20*time.Second, "result after the retry", func() bool { return nested(get(t, gvr, ns, "w1"), "status.poke") == "poked" })
	got := seen.list()
	if len(got) != 2 {
		t.Fatalf("attempts = %d, want 2", len(got))
	}
	// Progress records keep milliseconds: allow for the truncation.
	if gap := got[1].at.Sub(got[0].at); gap < delay-10*time.Millisecond {
		t.Fatalf("retried after %s, before the Temporary delay of %s", gap, delay)
	}
	if got[0].cause != runtime.CauseEnqueue || got[1].cause != runtime.CauseEnqueue || got[1].retry != 1 {
		t.Fatalf("attempts = %+v, want cause enqueue and Retry 0, 1", got)
	}
	wantEvent(t, ns, "w1", runtime.ReasonRetry, "not yet")
	if ann := get(t, gvr, ns, "w1").GetAnnotations(); ann["runtime.tailplane.io/poke"] != "" {
		t.Fatalf("progress not purged after the cycle: %v", ann)
	}
	// A later Enqueue handles it again; Enqueue after a delay waits for it.
	before := time.Now()
	op.Enqueue(gvr, ns+"/w1", 700*time.Millisecond)
	testpoll.UntilTrue(t, 20*time.Second, "third run", func() bool { return len(seen.list()) == 3 })
	if gap := seen.list()[2].at.Sub(before); gap < 690*time.Millisecond {
		t.Fatalf("delayed Enqueue ran after %s, want at least 700ms", gap)
	}
}

// A fresh Enqueue is news that the handler's dependencies changed: it runs
// a handler that is waiting out a long retry delay at once.
func TestEnqueueCutsRetryDelayShort(t *testing.T) {
	gvr := newCRD(t, false)
	ns := env.Namespace(t)
	var seen attempts
	op := newOperator(t, testSettings())
	op.On(gvr, "sync", func(_ context.Context, ev *runtime.Event) (any, error) {
		if seen.add(ev) == 1 {
			return nil, runtime.Temporary(errors.New("waiting for something"), time.Hour)
		}
		return "synced", nil
	}, runtime.Causes(runtime.CauseCreate, runtime.CauseEnqueue))
	start(t, op)
	create(t, gvr, widget(ns, "w1", nil, nil))
	testpoll.UntilTrue(t, 20*time.Second, "delayed", func() bool {
		return strings.Contains(get(t, gvr, ns, "w1").GetAnnotations()["runtime.tailplane.io/sync"], `"d":`)
	})
	op.Enqueue(gvr, ns+"/w1", 0)
	testpoll.UntilTrue(t, 20*time.Second, "result", func() bool { return nested(get(t, gvr, ns, "w1"), "status.sync") == "synced" })
	if got := seen.list(); len(got) != 2 || got[0].cause != runtime.CauseCreate || got[1].retry != 1 {
		t.Fatalf("attempts = %+v, want create then a retry", got)
	}
}

// Watch maps changes of another resource (ConfigMaps) to the keys of the
// objects to handle again; only handlers registered for CauseEnqueue run.
func TestWatchMapping(t *testing.T) {
	gvr := newCRD(t, false)
	ns := env.Namespace(t)
	configmaps := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	var synced, made attempts
	op := newOperator(t, testSettings())
	op.On(gvr, "sync", func(_ context.Context, ev *runtime.Event) (any, error) {
		synced.add(ev)
		return nil, nil
	}, runtime.Causes(runtime.CauseCreate, runtime.CauseEnqueue))
	op.OnCreate(gvr, "make", func(_ context.Context, ev *runtime.Event) (any, error) { made.add(ev); return nil, nil })
	var events eventLog
	err := op.Watch(configmaps, "configs", func(typ watch.EventType, old, obj *unstructured.Unstructured) []runtime.Key {
		events.add(typ, old != nil)
		return []runtime.Key{{Resource: gvr, Namespace: obj.GetNamespace(), Name: obj.GetLabels()["widget"]}}
	}, runtime.Namespace(ns), runtime.Label("widget", runtime.Present()))
	if err != nil {
		t.Fatal(err)
	}
	start(t, op)
	create(t, gvr, widget(ns, "w1", nil, nil))
	handled(t, gvr, ns, "w1")
	kube := kubernetes.NewForConfigOrDie(env.Config(t))
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c1", Namespace: ns, Labels: map[string]string{"widget": "w1"}}}
	if _, err := kube.CoreV1().ConfigMaps(ns).Create(context.Background(), cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testpoll.UntilTrue(t, 20*time.Second, "handled after the ConfigMap appeared", func() bool { return len(synced.list()) == 2 })
	cm.Data = map[string]string{"k": "v"}
	if _, err := kube.CoreV1().ConfigMaps(ns).Update(context.Background(), cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	testpoll.UntilTrue(t, 20*time.Second, "handled after the ConfigMap changed", func() bool { return len(synced.list()) == 3 })
	// A ConfigMap outside the filter maps to nothing.
	other := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c2", Namespace: ns}}
	if _, err := kube.CoreV1().ConfigMaps(ns).Create(context.Background(), other, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testpoll.AlwaysTrue(t, time.Second, "no more runs", func() bool { return len(synced.list()) == 3 && len(made.list()) == 1 })
	got := synced.list()
	if got[0].cause != runtime.CauseCreate || got[1].cause != runtime.CauseEnqueue || got[2].cause != runtime.CauseEnqueue {
		t.Fatalf("causes = %+v, want create, enqueue, enqueue", got)
	}
	if s := events.String(); s != "ADDED,MODIFIED+old" {
		t.Fatalf("map function saw %s, want ADDED,MODIFIED+old", s)
	}
}

// eventLog records the watch events a map function saw.
type eventLog struct {
	mu  sync.Mutex
	got []string
}

func (s *eventLog) add(typ watch.EventType, withOld bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := string(typ)
	if withOld {
		e += "+old"
	}
	s.got = append(s.got, e)
}

func (s *eventLog) String() string { s.mu.Lock(); defer s.mu.Unlock(); return strings.Join(s.got, ",") }

// wantEvent waits for an Event about the object with the reason and a
// message containing msg.
func wantEvent(t *testing.T, ns, name, reason, msg string) {
	t.Helper()
	kube := kubernetes.NewForConfigOrDie(env.Config(t))
	testpoll.UntilTrue(t, 20*time.Second, "Event "+reason, func() bool {
		list, err := kube.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return false
		}
		for _, e := range list.Items {
			if e.InvolvedObject.Name == name && e.Reason == reason && strings.Contains(e.Message, msg) {
				return true
			}
		}
		return false
	})
}
