package bench

import (
	"context"
	"flag"
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

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/tailplane/tailplane/crds"
	"github.com/tailplane/tailplane/internal/tailnet/tailnettest"
	"github.com/tailplane/tailplane/internal/testenv"
)

var env = testenv.New()

// TestMain starts the control plane only when benchmarks run: the package has
// no tests, and `go test ./...` should not pay for an API server here.
func TestMain(m *testing.M) {
	flag.Parse()
	if f := flag.Lookup("test.bench"); f == nil || f.Value.String() == "" {
		os.Exit(m.Run())
	}
	os.Exit(env.Run(m))
}

// services is how many exposed Services each run creates at once.
const services = 500

// BenchmarkOperator500Services creates 500 exposed Services at once and runs
// the operator binary until every proxy's StatefulSet and config Secret
// exists: with the default settings (4 workers, 100 API requests/s per
// client) side by side with 16 workers and 400 requests/s. Metrics: seconds
// to converge, proxies/s and the operator's peak RSS.
func BenchmarkOperator500Services(b *testing.B) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	objs, err := crds.Objects()
	if err == nil {
		err = testenv.InstallCRDs(ctx, dynamic.NewForConfigOrDie(env.Config(b)), objs...)
	}
	if err != nil {
		b.Fatalf("install CRDs: %v", err)
	}
	// BENCH_OPERATOR names another build of the operator to measure (an
	// earlier commit's, for a before and after in one session).
	bin := os.Getenv("BENCH_OPERATOR")
	if bin == "" {
		bin = filepath.Join(b.TempDir(), "tailplane-operator")
		build := exec.Command("go", "build", "-o", bin, "github.com/tailplane/tailplane/cmd/tailplane-operator")
		build.Stderr = os.Stderr
		if err := build.Run(); err != nil {
			b.Fatalf("build operator: %v", err)
		}
	}
	for _, c := range []struct{ workers, qps int }{{4, 100}, {16, 400}} {
		b.Run(fmt.Sprintf("workers=%d,qps=%d", c.workers, c.qps), func(b *testing.B) {
			var secs, rss float64
			var calls, writes int
			for range b.N {
				r := runOnce(b, bin, c.workers, c.qps)
				secs += r.seconds
				rss += r.rssMB
				calls += r.calls
				writes += r.writes
			}
			b.ReportMetric(secs/float64(b.N), "s/converge")
			b.ReportMetric(float64(services)*float64(b.N)/secs, "proxies/s")
			b.ReportMetric(rss/float64(b.N), "MB-peak-RSS")
			b.ReportMetric(float64(calls)/float64(services*b.N), "API-calls/proxy")
			b.ReportMetric(float64(writes)/float64(services*b.N), "API-writes/proxy")
		})
	}
}

// run is what one run measured.
type run struct {
	seconds float64 // from the operator's start until every proxy exists
	rssMB   float64 // the operator's peak RSS
	// calls and writes are the API requests the operator made until then
	// (writes: create, update, patch, delete).
	calls, writes int
}

// runOnce creates the Services, starts the operator, waits for every
// StatefulSet and config Secret, stops the operator and returns what it
// measured.
func runOnce(b *testing.B, bin string, workers, qps int) run {
	b.StopTimer()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	kube := env.Clientset(b)
	userNS, opNS := env.Namespace(b), env.Namespace(b)
	createServices(ctx, b, kube, userNS)

	api := tailnettest.NewServer()
	defer api.Close()
	dir := b.TempDir()
	idFile, secretFile := filepath.Join(dir, "id"), filepath.Join(dir, "secret")
	_ = os.WriteFile(idFile, []byte(tailnettest.ClientID), 0o600)
	_ = os.WriteFile(secretFile, []byte(tailnettest.ClientSecret), 0o600)
	counter := newAPICounter(b, env.Config(b))
	cmd := exec.CommandContext(ctx, bin)
	cmd.Env = append(os.Environ(),
		"KUBECONFIG="+counter.kubeconfig(b),
		"OPERATOR_NAMESPACE="+opNS, "OPERATOR_LOGIN_SERVER="+api.URL,
		"CLIENT_ID_FILE="+idFile, "CLIENT_SECRET_FILE="+secretFile,
		"TAILPLANE_WATCH_NAMESPACE="+userNS, "TAILPLANE_LEADER_ELECTION=false", "TAILPLANE_OPERATOR_DEVICE=false",
		"TAILPLANE_HEALTH_ADDR=-", "TAILPLANE_METRICS_ADDR=-", "TAILPLANE_WORKERS="+strconv.Itoa(workers), "TAILPLANE_KUBE_QPS="+strconv.Itoa(qps),
		"OPERATOR_LOGGING=info")
	logFile, err := os.Create(filepath.Join(dir, "operator.log"))
	if err != nil {
		b.Fatal(err)
	}
	defer logFile.Close()
	cmd.Stdout, cmd.Stderr = logFile, logFile
	b.StartTimer()
	start := time.Now()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	waitConverged(ctx, b, kube, opNS, exited, logFile.Name())
	took := time.Since(start)
	b.StopTimer()
	calls, writes, lines := counter.snapshot()
	b.Logf("%d API requests until converged (%d writes):\n%s", calls, writes, strings.Join(lines, "\n"))
	_ = cmd.Process.Signal(syscall.SIGTERM)
	<-exited
	rss := 0.0
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		rss = float64(ru.Maxrss) / 1024 // Linux reports KiB
	}
	if n := len(api.Keys()); n != services {
		b.Fatalf("%d auth keys minted for %d proxies", n, services)
	}
	b.StartTimer()
	return run{seconds: took.Seconds(), rssMB: rss, calls: calls, writes: writes}
}

func createServices(ctx context.Context, b *testing.B, kube kubernetes.Interface, ns string) {
	var wg sync.WaitGroup
	errs := make(chan error, services)
	sem := make(chan struct{}, 32)
	for i := range services {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			svc := &corev1.Service{
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("svc-%03d", i), Annotations: map[string]string{"tailscale.com/expose": "true"}},
				Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}},
			}
			if _, err := kube.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
}

func waitConverged(ctx context.Context, b *testing.B, kube kubernetes.Interface, opNS string, exited <-chan struct{}, logPath string) {
	for {
		sts, err1 := kube.AppsV1().StatefulSets(opNS).List(ctx, metav1.ListOptions{})
		secrets, err2 := kube.CoreV1().Secrets(opNS).List(ctx, metav1.ListOptions{LabelSelector: "tailscale.com/secret-type=config"})
		if err1 == nil && err2 == nil && len(sts.Items) >= services && len(secrets.Items) >= services {
			return
		}
		select {
		case <-exited:
			out, _ := os.ReadFile(logPath)
			b.Fatalf("operator exited early:\n%s", out)
		case <-ctx.Done():
			b.Fatalf("not converged: %d StatefulSets, %d config Secrets", len(sts.Items), len(secrets.Items))
		case <-time.After(200 * time.Millisecond):
		}
	}
}
