package benchruntime

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"

	"github.com/tailplane/tailplane/internal/testenv"
)

var env = testenv.New()

func TestMain(m *testing.M) { os.Exit(env.Run(m)) }

const (
	group      = "bench.runtime.test"
	annotation = "bench.tailplane.io/handled"
)

var widgets = schema.GroupVersionResource{Group: group, Version: "v1", Resource: "widgets"}

func installCRD(tb testing.TB) {
	tb.Helper()
	open := map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true}
	crd := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]any{"name": "widgets." + group},
		"spec": map[string]any{
			"group": group, "scope": "Namespaced",
			"names": map[string]any{"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
			"versions": []any{map[string]any{"name": "v1", "served": true, "storage": true,
				"schema": map[string]any{"openAPIV3Schema": map[string]any{"type": "object",
					"properties": map[string]any{"spec": open, "status": open}}}}},
		},
	}}
	if err := testenv.InstallCRDs(context.Background(), dynamic.NewForConfigOrDie(env.Config(tb)), crd); err != nil {
		tb.Fatal(err)
	}
}

// buildOperators compiles both operator commands once.
func buildOperators(tb testing.TB) (dir string) {
	tb.Helper()
	dir = tb.TempDir()
	out, err := exec.Command("go", "build", "-o", dir+"/", "./cmd/runtime-op", "./cmd/crt-op").CombinedOutput()
	if err != nil {
		tb.Fatalf("build operators: %v\n%s", err, out)
	}
	return dir
}

// proc is one operator process.
type proc struct {
	cmd    *exec.Cmd
	exited chan struct{}
	stderr string
}

// startOperator starts bin watching ns and waits until it printed "ready".
func startOperator(tb testing.TB, bin, ns string, workers int, args ...string) *proc {
	tb.Helper()
	cmd := exec.Command(bin, append([]string{"-kube", filepath.Join(env.Dir(), "kubeconfig"),
		"-namespace", ns, "-group", group, "-workers", strconv.Itoa(workers)}, args...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stdout, _ := cmd.StdoutPipe()
	stderr, err := os.Create(filepath.Join(tb.TempDir(), "stderr"))
	if err != nil {
		tb.Fatal(err)
	}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	p := &proc{cmd: cmd, exited: make(chan struct{}), stderr: stderr.Name()}
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if sc.Text() == "ready" {
				close(ready)
			}
		}
	}()
	go func() { _ = cmd.Wait(); close(p.exited) }()
	tb.Cleanup(p.stop)
	select {
	case <-ready:
	case <-p.exited:
		b, _ := os.ReadFile(stderr.Name())
		tb.Fatalf("%s exited before ready: %s", filepath.Base(bin), b)
	case <-time.After(2 * time.Minute):
		tb.Fatalf("%s not ready after 2m", filepath.Base(bin))
	}
	return p
}

// peakRSS is the process's high-water resident set (VmHWM) in MiB.
func (p *proc) peakRSS(tb testing.TB) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	if err != nil {
		tb.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
			return kb / 1024
		}
	}
	tb.Fatal("no VmHWM")
	return 0
}

func (p *proc) stop() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(15 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
}

// createWidgets creates n Widgets in ns with 16 concurrent clients.
func createWidgets(tb testing.TB, dyn dynamic.Interface, ns string, n int) {
	tb.Helper()
	ri := dyn.Resource(widgets).Namespace(ns)
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for w := range 16 {
		wg.Go(func() {
			for i := w; i < n; i += 16 {
				obj := &unstructured.Unstructured{Object: map[string]any{
					"apiVersion": group + "/v1", "kind": "Widget",
					"metadata": map[string]any{"name": fmt.Sprintf("w-%05d", i), "labels": map[string]any{"app": "bench"}},
					"spec":     map[string]any{"replicas": int64(i % 5), "image": "example.com/app:1.2.3"},
				}}
				if _, err := ri.Create(context.Background(), obj, metav1.CreateOptions{}); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		tb.Fatalf("create widgets: %v", err)
	}
}

// handledWatch counts the objects of ns that carry the annotation; done is
// closed once n have it. It uses an informer rather than a bare watch: under
// a burst the API server may close a watch whose reader falls behind, and an
// informer lists again instead of losing count.
func handledWatch(tb testing.TB, dyn dynamic.Interface, ns string, n int) (done chan struct{}, stop func()) {
	tb.Helper()
	inf := dynamicinformer.NewFilteredDynamicInformer(dyn, widgets, ns, 0, cache.Indexers{}, nil).Informer()
	done = make(chan struct{})
	var mu sync.Mutex
	seen := map[string]bool{}
	count := func(obj any) {
		u, ok := obj.(*unstructured.Unstructured)
		if !ok {
			return
		}
		if _, has := u.GetAnnotations()[annotation]; !has {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if !seen[u.GetName()] {
			seen[u.GetName()] = true
			if len(seen) == n {
				close(done)
			}
		}
	}
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: count, UpdateFunc: func(_, obj any) { count(obj) }})
	ctx, cancel := context.WithCancel(context.Background())
	go inf.RunWithContext(ctx)
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		tb.Fatal("handled informer did not sync")
	}
	return done, cancel
}

// waitHandled waits for all n objects of ns to carry the annotation.
func waitHandled(tb testing.TB, done chan struct{}, p *proc, what string) {
	tb.Helper()
	select {
	case <-done:
	case <-time.After(3 * time.Minute):
		b, _ := os.ReadFile(p.stderr)
		if len(b) > 4000 {
			b = b[len(b)-4000:]
		}
		tb.Fatalf("%s (pid %d): not all objects handled after 3m; its log ends with:\n%s", what, p.cmd.Process.Pid, b)
	}
}
