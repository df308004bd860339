// Package testenv gives a test package a real kube-apiserver (etcd +
// kube-apiserver started by kind-e2e's devcluster binary), in the way envtest
// does for controller-runtime projects, and a namespace per test.
//
// The binary is found through TAILPLANE_TEST_ASSETS, which `go tool task test`
// fills after building it once. Tests never skip when it is missing: they fail
// and say which task builds it.
//
// It imports client-go and the standard library; product code never imports it.
package testenv

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// AssetsEnv names the folder holding the devcluster binary.
const AssetsEnv = "TAILPLANE_TEST_ASSETS"

// missingAssets is what a test package prints when it cannot find devcluster.
const missingAssets = AssetsEnv + " is not set or holds no devcluster binary; " +
	"run the tests with `go tool task test`, or build the binary with `go tool task test:assets` " +
	"and export " + AssetsEnv + "=$(go tool task test:assets-dir)"

// Env is one control plane shared by the tests of a package. Create it with
// New in a package variable and start it from TestMain with Run.
type Env struct {
	cfg       *rest.Config
	clientset kubernetes.Interface
	dir       string
	cmd       *exec.Cmd
	exited    chan struct{}
}

// New returns an Env that is not started yet.
func New() *Env { return &Env{} }

// Run starts the control plane, runs the package's tests, stops the control
// plane and returns the exit code for os.Exit. When the control plane cannot
// start, it reports why and returns 1: a missing control plane is a failure.
func (e *Env) Run(m *testing.M) int {
	if err := e.start(); err != nil {
		fmt.Fprintln(os.Stderr, "testenv:", err)
		e.stop()
		return 1
	}
	code := m.Run()
	e.stop()
	return code
}

// Binary returns the path of the devcluster binary from TAILPLANE_TEST_ASSETS.
func Binary() (string, error) {
	dir := os.Getenv(AssetsEnv)
	if dir == "" {
		return "", fmt.Errorf("%s", missingAssets)
	}
	bin := filepath.Join(dir, "devcluster")
	if _, err := os.Stat(bin); err != nil {
		return "", fmt.Errorf("%s (%v)", missingAssets, err)
	}
	return bin, nil
}

func (e *Env) start() error {
	bin, err := Binary()
	if err != nil {
		return err
	}
	e.dir, err = os.MkdirTemp("", "tailplane-testenv-")
	if err != nil {
		return err
	}
	cmd := exec.Command(bin, "apiserver", "--dir", e.dir)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	logFile, err := os.Create(filepath.Join(e.dir, "devcluster.log"))
	if err != nil {
		return err
	}
	cmd.Stderr = logFile
	// The control plane must not outlive a test binary that crashes.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", bin, err)
	}
	e.cmd = cmd
	e.exited = make(chan struct{})
	ready := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if kc, ok := strings.CutPrefix(sc.Text(), "ready kubeconfig="); ok {
				ready <- kc
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
	}()
	go func() { _ = cmd.Wait(); logFile.Close(); close(e.exited) }()

	select {
	case kc := <-ready:
		return e.connect(kc)
	case <-e.exited:
		return fmt.Errorf("devcluster exited before it was ready; log: %s", tail(logFile.Name()))
	case <-time.After(3 * time.Minute):
		return fmt.Errorf("devcluster not ready after 3m; log: %s", tail(logFile.Name()))
	}
}

func (e *Env) connect(kubeconfig string) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return fmt.Errorf("load %s: %w", kubeconfig, err)
	}
	// Tests create objects in bursts; the client-side limiter would only slow them.
	cfg.QPS, cfg.Burst = -1, 0
	e.clientset, err = kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	e.cfg = cfg
	return nil
}

func (e *Env) stop() {
	if e.cmd != nil && e.cmd.Process != nil {
		_ = e.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-e.exited:
		case <-time.After(30 * time.Second):
			_ = e.cmd.Process.Kill()
			<-e.exited
		}
	}
	if e.dir != "" {
		_ = os.RemoveAll(e.dir)
	}
}

// Config returns a copy of the admin rest.Config for the control plane.
func (e *Env) Config(t testing.TB) *rest.Config {
	t.Helper()
	if e.cfg == nil {
		t.Fatal("testenv: control plane not started; call env.Run(m) from TestMain")
	}
	return rest.CopyConfig(e.cfg)
}

// Clientset returns a typed admin client.
func (e *Env) Clientset(t testing.TB) kubernetes.Interface {
	t.Helper()
	if e.clientset == nil {
		t.Fatal("testenv: control plane not started; call env.Run(m) from TestMain")
	}
	return e.clientset
}

// Dir is the control plane's folder: kubeconfig, logs, etcd data.
func (e *Env) Dir() string { return e.dir }

var unsafeChars = regexp.MustCompile(`[^a-z0-9-]+`)

// Namespace creates a namespace for this test and deletes it when the test ends.
func (e *Env) Namespace(t testing.TB) string {
	t.Helper()
	base := strings.Trim(unsafeChars.ReplaceAllString(strings.ToLower(t.Name()), "-"), "-")
	if len(base) > 40 {
		base = base[:40]
	}
	name := strings.Trim(base, "-") + "-" + rand.String(5)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs := e.Clientset(t)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		t.Fatalf("testenv: create namespace %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		err := cs.CoreV1().Namespaces().Delete(ctx, name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("testenv: delete namespace %s: %v", name, err)
		}
	})
	return name
}

func tail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return string(b)
}
