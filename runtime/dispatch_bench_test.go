package runtime

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
)

// BenchmarkDispatch measures the runtime's own cost per event, in memory:
// informer notification, queue, cause detection, filters, the handler call,
// logging, Events and building the merged patch. The patch is not sent (no API call) and the
// handler does nothing but add one annotation.
//
// events=all and events=failures register an OnCreate handler;
// causes=create,update,resume registers it with On for those three causes,
// as most handlers are (and as a controller-runtime reconciler runs on every
// change), which before WithDiff kept each object's essence.
func BenchmarkDispatch(b *testing.B) {
	b.Run("events=all", func(b *testing.B) { benchDispatch(b, false, false) })
	b.Run("events=failures", func(b *testing.B) { benchDispatch(b, true, false) })
	b.Run("causes=create,update,resume", func(b *testing.B) { benchDispatch(b, false, true) })
}

func benchDispatch(b *testing.B, quiet, allCauses bool) {
	gvr := schema.GroupVersionResource{Group: "bench.example.com", Version: "v1", Resource: "widgets"}
	op, err := New(&rest.Config{Host: "http://127.0.0.1:1"}, Settings{
		Logger: NewLogger(io.Discard, false), HealthAddress: "-", MetricsAddress: "-", QuietSuccess: quiet,
	})
	if err != nil {
		b.Fatal(err)
	}
	annotate := func(_ context.Context, ev *Event) (any, error) {
		ev.Patch.SetAnnotation("bench.tailplane.io/handled", "1")
		return nil, nil
	}
	if allCauses {
		op.On(gvr, "annotate", annotate, Label("app", "web"), Causes(CauseCreate, CauseUpdate, CauseResume))
	} else {
		op.OnCreate(gvr, "annotate", annotate, Label("app", "web"))
	}
	op.OnUpdate(gvr, "other", func(context.Context, *Event) (any, error) { return nil, nil }, Label("app", "db"))
	// Events go to a sink that drops them: the recorder's cost stays in the
	// measurement, the network does not.
	op.sinkEvents(dropEvents{})
	defer func() { close(op.eventsDone); op.events.Shutdown() }()
	sent := 0
	op.send = func(_ context.Context, _ Key, body []byte, _ ...string) (*unstructured.Unstructured, error) {
		sent += len(body)
		return &unstructured.Unstructured{Object: map[string]any{}}, nil // same "" resourceVersion: no stale mark
	}
	src := op.sourceList[0]
	src.informer = cache.NewSharedIndexInformer(&cache.ListWatch{}, &unstructured.Unstructured{}, 0, cache.Indexers{})
	src.stop = make(chan struct{})
	// Every event is a new object, as in a burst of creations (repeating
	// objects would also make client-go's event correlator aggregate).
	objects := b.N
	objs := make([]*unstructured.Unstructured, objects)
	for i := range objs {
		objs[i] = benchObject(gvr, i)
		stored, _ := compact(objs[i])
		_ = src.informer.GetStore().Add(stored)
	}
	ctx := context.Background()
	durations := make([]time.Duration, 0, b.N)
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		obj := objs[i%objects]
		obj.SetResourceVersion(strconv.Itoa(objects + i + 1)) // a new version, as a watch event brings
		start := time.Now()
		// What the informer does with a watch event: the transform, the
		// store, then the runtime's event handler.
		stored, err := compact(obj)
		if err != nil {
			b.Fatal(err)
		}
		_ = src.informer.GetStore().Update(stored)
		op.observe(gvr, stored, false)
		key, _ := op.queue.Get()
		if _, err := op.process(ctx, key); err != nil {
			b.Fatal(err)
		}
		op.queue.Forget(key)
		op.queue.Done(key)
		durations = append(durations, time.Since(start))
	}
	b.StopTimer()
	if sent == 0 {
		b.Fatal("no patch was built")
	}
	slices.Sort(durations)
	p50 := durations[len(durations)/2]
	p99 := durations[len(durations)*99/100]
	b.ReportMetric(float64(p50.Nanoseconds())/1e3, "p50-µs")
	b.ReportMetric(float64(p99.Nanoseconds())/1e3, "p99-µs")
	if testing.Verbose() || b.N > 1000 {
		fmt.Printf("dispatch per event (in memory, no API call, success events %v, causes create,update,resume %v): p50 %.1f µs, p99 %.1f µs over %d events\n",
			!quiet, allCauses, float64(p50.Nanoseconds())/1e3, float64(p99.Nanoseconds())/1e3, b.N)
	}
}

func benchObject(gvr schema.GroupVersionResource, i int) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": gvr.GroupVersion().String(), "kind": "Widget",
		"spec": map[string]any{"replicas": int64(i % 5), "image": "example.com/app:1.2.3", "ports": []any{int64(80), int64(443)}},
	}}
	u.SetNamespace("bench")
	u.SetName("w-" + strconv.Itoa(i))
	u.SetUID(types.UID("uid-" + strconv.Itoa(i)))
	u.SetResourceVersion(strconv.Itoa(i + 1))
	u.SetLabels(map[string]string{"app": "web"})
	u.SetAnnotations(map[string]string{"example.com/owner": "team-a"})
	return u
}
