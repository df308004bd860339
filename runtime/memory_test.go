package runtime

import (
	"context"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/tailplane/tailplane/internal/testpoll"
)

// MemoryOnly reports whether a test binary's -test.run and -test.bench
// patterns select only what runs in memory: tests named TestMemory... (on
// client-go's fakes and a fake clock, see newMemory), fuzz targets named
// FuzzMemory... and BenchmarkDispatch.
// TestMain then starts no control plane.
func MemoryOnly(run, bench string) bool {
	if run == "" {
		return false
	}
	for _, alt := range strings.Split(run, "|") {
		alt = strings.TrimLeft(alt, "^(")
		if alt != "$" && alt != "$)" && !strings.HasPrefix(alt, "TestMemory") && !strings.HasPrefix(alt, "FuzzMemory") {
			return false
		}
	}
	return bench == "" || strings.HasPrefix(strings.TrimLeft(bench, "^("), "BenchmarkDispatch")
}

// memGVR is the resource of the in-memory tests.
var memGVR = schema.GroupVersionResource{Group: "memory.runtime.test", Version: "v1", Resource: "widgets"}

// memory is an Operator on client-go's in-memory fakes (dynamic client,
// clientset, discovery) and a fake clock: the queue, retries, backoff and
// timers run as in production, without an API server, and time moves only
// when the test steps it.
type memory struct {
	t     *testing.T
	op    *Operator
	clock *clocktesting.FakeClock
	dyn   *dynamicfake.FakeDynamicClient
}

// newMemory returns an Operator on fakes; register handlers on m.op, then
// call m.run.
func newMemory(t *testing.T, s Settings) *memory {
	t.Helper()
	fc := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	s.Clock = fc
	s.HealthAddress, s.MetricsAddress = "-", "-"
	s.WatchCheckInterval = -1
	if s.Logger == nil {
		s.Logger = NewLogger(io.Discard, false)
	}
	op, err := New(&rest.Config{Host: "http://127.0.0.1:1"}, s)
	if err != nil {
		t.Fatal(err)
	}
	kube := kubefake.NewClientset()
	kube.Resources = []*metav1.APIResourceList{{
		GroupVersion: memGVR.GroupVersion().String(),
		APIResources: []metav1.APIResource{{Name: memGVR.Resource, Namespaced: true, Kind: "Widget"}},
	}}
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(kruntime.NewScheme(),
		map[schema.GroupVersionResource]string{memGVR: "WidgetList"})
	op.kube, op.dyn = kube, dyn
	op.sinkEvents(dropEvents{})
	return &memory{t: t, op: op, clock: fc, dyn: dyn}
}

// sinkEvents sends the operator's Events to sink instead of the API server.
func (o *Operator) sinkEvents(sink record.EventSink) {
	close(o.eventsDone)
	o.events.Shutdown()
	o.events, o.recorder = newRecorderTo(sink, o.settings.Component)
	o.eventsDone = make(chan struct{})
	go o.postEvents(o.eventsDone)
}

// run starts the operator until the test ends and waits until it handles.
func (m *memory) run() {
	m.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.op.Run(ctx) }()
	m.t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			m.t.Errorf("Run: %v", err)
		}
	})
	testpoll.UntilTrue(m.t, 10*time.Second, "operator ready", m.op.Ready)
}

// create adds a Widget named name with spec, labels and annotations (nil:
// none).
func (m *memory) create(name string, spec map[string]any, labels, annotations map[string]string) {
	m.t.Helper()
	u := widget(name, spec, labels, annotations)
	if _, err := m.dyn.Resource(memGVR).Namespace("default").Create(context.Background(), u, metav1.CreateOptions{}); err != nil {
		m.t.Fatalf("create %s: %v", name, err)
	}
}

// widget is a Widget of memGVR in namespace default.
func widget(name string, spec map[string]any, labels, annotations map[string]string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": memGVR.GroupVersion().String(), "kind": "Widget", "spec": spec,
	}}
	u.SetNamespace("default")
	u.SetName(name)
	u.SetUID(types.UID("uid-" + name))
	u.SetLabels(labels)
	u.SetAnnotations(annotations)
	return u
}

// patch merge-patches the Widget name.
func (m *memory) patch(name, body string) {
	m.t.Helper()
	if _, err := m.dyn.Resource(memGVR).Namespace("default").Patch(context.Background(), name,
		types.MergePatchType, []byte(body), metav1.PatchOptions{}); err != nil {
		m.t.Fatalf("patch %s: %v", name, err)
	}
}

// get returns the Widget name as the fake API server holds it.
func (m *memory) get(name string) *unstructured.Unstructured {
	m.t.Helper()
	u, err := m.dyn.Resource(memGVR).Namespace("default").Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		m.t.Fatalf("get %s: %v", name, err)
	}
	return u
}

// cached returns the Widget name as the operator's informer holds it.
func (m *memory) cached(name string) *unstructured.Unstructured {
	return m.op.lookup(Key{Resource: memGVR, Namespace: "default", Name: name})
}

// calls records handler calls with the fake clock's time of each.
type calls struct {
	mu  sync.Mutex
	at  []time.Time
	evs []*Event
}

func (c *calls) add(at time.Time, ev *Event) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.at = append(c.at, at)
	c.evs = append(c.evs, ev)
}

func (c *calls) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.at)
}

func (c *calls) last() (time.Time, *Event) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.at) == 0 {
		return time.Time{}, nil
	}
	return c.at[len(c.at)-1], c.evs[len(c.evs)-1]
}

// dropEvents is an event sink that accepts and forgets.
type dropEvents struct{}

func (dropEvents) Create(e *corev1.Event) (*corev1.Event, error)          { return e, nil }
func (dropEvents) Update(e *corev1.Event) (*corev1.Event, error)          { return e, nil }
func (dropEvents) Patch(e *corev1.Event, _ []byte) (*corev1.Event, error) { return e, nil }

// The gate of TestMain: only patterns that select nothing but in-memory
// tests skip the control plane.
func TestMemoryOnlyPatterns(t *testing.T) {
	for _, c := range []struct {
		run, bench string
		want       bool
	}{
		{"TestMemoryClock", "", true},
		{"FuzzMemoryCachedJSON|TestMemoryCached", "", true},
		{"^(TestMemoryA|TestMemoryB)$", "", true},
		{"^$", "BenchmarkDispatch", true},
		{"", "", false},
		{"TestMemoryA|TestCreate", "", false},
		{"^$", ".", false},
		{"Memory", "", false},
	} {
		if got := MemoryOnly(c.run, c.bench); got != c.want {
			t.Errorf("MemoryOnly(%q, %q) = %v, want %v", c.run, c.bench, got, c.want)
		}
	}
}

// The package-level Apply takes no field manager of its own choosing.
func TestMemoryApplyNeedsFieldManager(t *testing.T) {
	m := newMemory(t, Settings{})
	if _, err := Apply(context.Background(), m.dyn, memGVR, widget("w", nil, nil, nil), ""); err == nil || !strings.Contains(err.Error(), "no field manager") {
		t.Fatalf("Apply without a field manager: %v, want refused", err)
	}
}
