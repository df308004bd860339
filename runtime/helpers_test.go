package runtime_test

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/dynamic"

	"github.com/tailplane/tailplane/internal/testenv"
	"github.com/tailplane/tailplane/internal/testpoll"
	"github.com/tailplane/tailplane/runtime"
)

var env = testenv.New()

// TestMain starts the control plane unless the run selects only the
// in-memory tests (TestMemory..., on client-go's fakes and a fake clock) and
// BenchmarkDispatch, which need none.
func TestMain(m *testing.M) {
	flag.Parse()
	if runtime.MemoryOnly(flag.Lookup("test.run").Value.String(), flag.Lookup("test.bench").Value.String()) {
		os.Exit(m.Run())
	}
	os.Exit(env.Run(m))
}

// newCRD installs a CRD of the test's own (kind Widget, a unique group) and
// returns its resource.
func newCRD(t *testing.T, statusSubresource bool) schema.GroupVersionResource {
	t.Helper()
	group := rand.String(8) + ".runtime.test"
	open := map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true}
	version := map[string]any{
		"name": "v1", "served": true, "storage": true,
		"schema": map[string]any{"openAPIV3Schema": map[string]any{
			"type":       "object",
			"properties": map[string]any{"spec": open, "status": open},
		}},
	}
	if statusSubresource {
		version["subresources"] = map[string]any{"status": map[string]any{}}
	}
	crd := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1",
		"kind":       "CustomResourceDefinition",
		"metadata":   map[string]any{"name": "widgets." + group},
		"spec": map[string]any{
			"group":    group,
			"scope":    "Namespaced",
			"names":    map[string]any{"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
			"versions": []any{version},
		},
	}}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := testenv.InstallCRDs(ctx, dyn(t), crd); err != nil {
		t.Fatal(err)
	}
	return schema.GroupVersionResource{Group: group, Version: "v1", Resource: "widgets"}
}

func dyn(t testing.TB) dynamic.Interface { return dynamic.NewForConfigOrDie(env.Config(t)) }

// testSettings are quick and quiet: no listeners, fast retries.
func testSettings() runtime.Settings {
	return runtime.Settings{
		Workers:            4,
		MinBackoff:         50 * time.Millisecond,
		MaxBackoff:         time.Second,
		WatchCheckInterval: -1,
		ShutdownTimeout:    2 * time.Second,
		HealthAddress:      "-",
		MetricsAddress:     "-",
		Logger:             runtime.NewLogger(io.Discard, false),
	}
}

func newOperator(t *testing.T, s runtime.Settings) *runtime.Operator {
	t.Helper()
	op, err := runtime.New(env.Config(t), s)
	if err != nil {
		t.Fatal(err)
	}
	return op
}

// running is an Operator started by start.
type running struct {
	cancel context.CancelFunc
	done   chan struct{} // closed when Run returned
	err    error
}

// stop cancels the operator and waits for Run to return.
func (r *running) stop(t *testing.T) {
	t.Helper()
	r.cancel()
	select {
	case <-r.done:
		if r.err != nil {
			t.Errorf("Run: %v", r.err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return 30s after cancel")
	}
}

// start runs op until the test ends and waits until it is ready.
func start(t *testing.T, op *runtime.Operator) *running {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{cancel: cancel, done: make(chan struct{})}
	go func() { r.err = op.Run(ctx); close(r.done) }()
	t.Cleanup(func() { cancel(); <-r.done })
	testpoll.UntilTrue(t, 30*time.Second, "operator ready", func() bool {
		select {
		case <-r.done:
			t.Fatalf("Run returned early: %v", r.err)
		default:
		}
		return op.Ready() && op.Leading()
	})
	return r
}

func widget(ns, name string, spec map[string]any, labels map[string]string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Widget", "spec": spec}}
	u.SetNamespace(ns)
	u.SetName(name)
	u.SetLabels(labels)
	return u
}

func create(t *testing.T, gvr schema.GroupVersionResource, obj *unstructured.Unstructured) *unstructured.Unstructured {
	t.Helper()
	obj.SetAPIVersion(gvr.GroupVersion().String())
	out, err := dyn(t).Resource(gvr).Namespace(obj.GetNamespace()).Create(context.Background(), obj, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create %s: %v", obj.GetName(), err)
	}
	return out
}

func get(t *testing.T, gvr schema.GroupVersionResource, ns, name string) *unstructured.Unstructured {
	t.Helper()
	out, err := dyn(t).Resource(gvr).Namespace(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		return nil
	}
	return out
}

func mergePatch(t *testing.T, gvr schema.GroupVersionResource, ns, name, patch string) {
	t.Helper()
	_, err := dyn(t).Resource(gvr).Namespace(ns).Patch(context.Background(), name, "application/merge-patch+json", []byte(patch), metav1.PatchOptions{})
	if err != nil {
		t.Fatalf("patch %s: %v", name, err)
	}
}

func remove(t *testing.T, gvr schema.GroupVersionResource, ns, name string) {
	t.Helper()
	if err := dyn(t).Resource(gvr).Namespace(ns).Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete %s: %v", name, err)
	}
}

func nested(obj *unstructured.Unstructured, path string) any {
	if obj == nil {
		return nil
	}
	v, _, _ := unstructured.NestedFieldNoCopy(obj.Object, strings.Split(path, ".")...)
	return v
}

// counter counts handler runs by name.
type counter struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *counter) inc(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[string]int{}
	}
	c.n[name]++
}

func (c *counter) get(name string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[name]
}

func (c *counter) String() string { c.mu.Lock(); defer c.mu.Unlock(); return fmt.Sprint(c.n) }
