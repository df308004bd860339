package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/charmbracelet/log"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"tailscale.com/ipn/store/mem"

	"github.com/tailplane/tailplane/internal/kubestate"
	"github.com/tailplane/tailplane/internal/proxystate"
	"github.com/tailplane/tailplane/internal/tailnettest"
	"github.com/tailplane/tailplane/internal/testpoll"
	"github.com/tailplane/tailplane/proxy"
	"github.com/tailplane/tailplane/proxy/config"
	"github.com/tailplane/tailplane/proxy/configwatch"
)

// buildMarker builds testdata/marker with its version string set, into
// <repo>/.cache/plugins as plugins/internal/wasmbuild does (that package is
// internal to plugins/; the Go build cache keeps a rebuild to the link).
func buildMarker(tb testing.TB, version string) []byte {
	tb.Helper()
	gomod, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		tb.Fatalf("go env GOMOD: %v", err)
	}
	root := filepath.Dir(strings.TrimSpace(string(gomod)))
	out := filepath.Join(root, ".cache", "plugins", "marker-"+version+".wasm")
	tmp := fmt.Sprintf("%s.%d.tmp", out, os.Getpid())
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "build", "-buildmode=c-shared", "-trimpath",
		"-ldflags=-X main.version="+version, "-o", tmp, "./cmd/tailplane-proxy/testdata/marker")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
	if b, err := cmd.CombinedOutput(); err != nil {
		tb.Fatalf("build marker %s: %v\n%s", version, err, b)
	}
	if err := os.Rename(tmp, out); err != nil {
		tb.Fatal(err)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// storeModule stores mod as the operator does (storeChunks) and returns
// the RoutingPlugin spec a proxy gets for it, and the module's sha256.
func storeModule(ctx context.Context, tb testing.TB, kube kubernetes.Interface, ns string, mod []byte) (json.RawMessage, string) {
	tb.Helper()
	names, digest := storeChunks(ctx, tb, kube, ns, mod)
	chunks, _ := json.Marshal(names)
	// The default timeout (1 s) and fail-closed: a plugin that cannot run
	// answers 503, which the load counts as a failure.
	return json.RawMessage(`{"module":{"secretKeyRef":{"name":"` + names[0] + `","key":"module.wasm.gz"},"secretChunks":` +
		string(chunks) + `,"sha256":"` + digest + `"},"failurePolicy":"Closed"}`), digest
}

// swapProxy is a proxy engine as tailplane-proxy runs it (config file,
// plugin loader reading the operator's module copies, state Secret), on a
// real tailnet, in front of one backend.
type swapProxy struct {
	engine  *proxy.Engine
	kube    kubernetes.Interface
	ns      string
	cfg     *config.Config
	cfgPath string
	client  *http.Client
}

const swapPlugin = "apps/marker"

func startSwapProxy(ctx context.Context, tb testing.TB, kube kubernetes.Interface, ns string, spec json.RawMessage) *swapProxy {
	tb.Helper()
	tn := tailnettest.New(tb)
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") }))
	tb.Cleanup(backend.Close)
	quiet := log.New(io.Discard)
	state, err := kubestate.New(ctx, kube, ns, "proxy-0")
	if err != nil {
		tb.Fatal(err)
	}
	loader, err := newPluginLoader(kube, ns, tb.TempDir(), state, nil, quiet)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = loader.manager.Close(context.Background()) })
	p := &swapProxy{kube: kube, ns: ns, cfgPath: filepath.Join(tb.TempDir(), "proxy-config.json")}
	p.cfg = &config.Config{Version: config.Version, Hostname: "swap-proxy", LoginServer: tn.ControlURL, Role: config.RoleIngressL7,
		L7:      &config.L7{PlainHTTP: true, DefaultBackend: &config.Backend{Service: "web", Address: backend.Listener.Addr().String()}},
		Plugins: []config.Plugin{{Name: swapPlugin, Spec: spec}}}
	p.write(tb, spec)
	e, err := proxy.New(proxy.Options{
		Source: &configwatch.File{Path: p.cfgPath, Interval: 50 * time.Millisecond, Log: quiet},
		State:  new(mem.Store), Ephemeral: true, StateDir: tb.TempDir(), EgressHost: "127.0.0.1",
		Kube: kube, Namespace: ns, Status: state, PluginRouters: loader.routers, Logger: quiet,
	})
	if err != nil {
		tb.Fatal(err)
	}
	p.engine = e
	rctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = e.Run(rctx); close(done) }()
	tb.Cleanup(func() { cancel(); <-done })
	testpoll.UntilTrue(tb, 60*time.Second, "proxy ready", e.Ready)
	wctx, wcancel := context.WithTimeout(ctx, 30*time.Second)
	defer wcancel()
	if err := tailnettest.WaitDERP(wctx, e.Node()); err != nil {
		tb.Fatal(err)
	}
	client := tn.Node(tb, "swap-client")
	ip4, _ := e.Node().TailscaleIPs()
	addr := net.JoinHostPort(ip4.String(), "80")
	// Kept-alive connections: a swap must not need new ones.
	p.client = &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		MaxIdleConnsPerHost: 200,
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return client.Dial(ctx, "tcp", addr)
		}}}
	return p
}

// write makes spec the plugin's spec in the proxy's config file (a rename,
// as the kubelet updates a mounted Secret).
func (p *swapProxy) write(tb testing.TB, spec json.RawMessage) {
	tb.Helper()
	p.cfg.Plugins = []config.Plugin{{Name: swapPlugin, Spec: spec}}
	doc, _ := json.Marshal(p.cfg)
	if err := os.WriteFile(p.cfgPath+".tmp", doc, 0o600); err != nil {
		tb.Fatal(err)
	}
	if err := os.Rename(p.cfgPath+".tmp", p.cfgPath); err != nil {
		tb.Fatal(err)
	}
}

// get sends one request and returns the plugin version that marked it.
func (p *swapProxy) get(ctx context.Context) (string, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://swap-proxy/", nil)
	resp, err := p.client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK || string(body) != "ok" {
		return "", fmt.Errorf("status %d %q", resp.StatusCode, body)
	}
	v := resp.Header.Get("X-Plugin-Version")
	if v == "" {
		return "", fmt.Errorf("response not marked by the plugin")
	}
	return v, nil
}

// reported returns the digest the proxy reports for the plugin in its
// state Secret.
func (p *swapProxy) reported(ctx context.Context) (string, error) {
	sec, err := p.kube.CoreV1().Secrets(p.ns).Get(ctx, "proxy-0", metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	var reports []proxystate.PluginReport
	if err := json.Unmarshal(sec.Data[proxystate.KeyPluginStatus], &reports); err != nil {
		return "", fmt.Errorf("plugin_status %q: %w", sec.Data[proxystate.KeyPluginStatus], err)
	}
	if len(reports) != 1 || !reports[0].Loaded || reports[0].Error != "" {
		return "", fmt.Errorf("plugin_status %+v", reports)
	}
	return reports[0].SHA256, nil
}

// sample is one request of the load.
type sample struct {
	start, end time.Time
	version    string
	err        error
}

// load sends requests at a constant rate, each in its own goroutine, until
// finish.
type load struct {
	mu      sync.Mutex
	samples []sample
	stop    chan struct{}
	ticker  sync.WaitGroup
	reqs    sync.WaitGroup
}

func startLoad(ctx context.Context, p *swapProxy, perSecond int) *load {
	l := &load{stop: make(chan struct{})}
	l.ticker.Add(1)
	go func() {
		defer l.ticker.Done()
		tick := time.NewTicker(time.Second / time.Duration(perSecond))
		defer tick.Stop()
		for {
			select {
			case <-l.stop:
				return
			case <-tick.C:
			}
			l.reqs.Add(1)
			go func() {
				defer l.reqs.Done()
				s := sample{start: time.Now()}
				s.version, s.err = p.get(ctx)
				s.end = time.Now()
				l.mu.Lock()
				l.samples = append(l.samples, s)
				l.mu.Unlock()
			}()
		}
	}()
	return l
}

// count returns how many requests so far were answered by version.
func (l *load) count(version string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, s := range l.samples {
		if s.err == nil && s.version == version {
			n++
		}
	}
	return n
}

// countAfter returns how many requests that started after t were answered.
func (l *load) countAfter(t time.Time) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, s := range l.samples {
		if s.start.After(t) {
			n++
		}
	}
	return n
}

// finish stops the load, waits for the requests in flight and returns
// every sample by start time.
func (l *load) finish() []sample {
	close(l.stop)
	l.ticker.Wait()
	l.reqs.Wait()
	l.mu.Lock()
	defer l.mu.Unlock()
	sort.Slice(l.samples, func(i, j int) bool { return l.samples[i].start.Before(l.samples[j].start) })
	return l.samples
}

// swapReport sums up one swap from old to new under load started at
// swapAt (the config write).
type swapReport struct {
	total, failed int
	failures      []string
	// stale are requests answered by old although they started after a
	// client had already received an answer from new.
	stale int
	// during are the requests in flight between swapAt and the first
	// answer from new; maxBefore and maxDuring are the longest latencies
	// before swapAt and during the swap.
	during               int
	firstNew             time.Duration // from swapAt
	maxBefore, maxDuring time.Duration
}

func analyse(samples []sample, oldV, newV string, swapAt time.Time) swapReport {
	r := swapReport{total: len(samples)}
	var firstNew time.Time
	for _, s := range samples {
		if s.err == nil && s.version == newV && (firstNew.IsZero() || s.end.Before(firstNew)) {
			firstNew = s.end
		}
	}
	r.firstNew = firstNew.Sub(swapAt)
	for _, s := range samples {
		lat := s.end.Sub(s.start)
		switch {
		case s.err != nil:
			r.failed++
			if len(r.failures) < 5 {
				r.failures = append(r.failures, s.err.Error())
			}
		case s.version != oldV && s.version != newV:
			r.failed++
			r.failures = append(r.failures, "answered by "+s.version)
		case s.version == oldV && !firstNew.IsZero() && s.start.After(firstNew):
			r.stale++
		}
		if s.end.Before(swapAt) {
			r.maxBefore = max(r.maxBefore, lat)
		} else if s.start.Before(firstNew) {
			r.during++
			r.maxDuring = max(r.maxDuring, lat)
		}
	}
	return r
}

// storeChunks stores mod as the operator does: gzip, in Secrets
// tp-wasm-<sha256>-<i> of at most 768 KiB. It returns their names and
// the module's sha256.
func storeChunks(ctx context.Context, tb testing.TB, kube kubernetes.Interface, ns string, mod []byte) ([]string, string) {
	tb.Helper()
	sum := sha256.Sum256(mod)
	digest := hex.EncodeToString(sum[:])
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, _ = zw.Write(mod)
	_ = zw.Close()
	var names []string
	for i, data := 0, gz.Bytes(); len(data) > 0; i++ {
		part := data[:min(len(data), 768<<10)]
		data = data[len(part):]
		name := fmt.Sprintf("tp-wasm-%s-%d", digest, i)
		names = append(names, name)
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Data: map[string][]byte{"module.wasm.gz": part}}
		if _, err := kube.CoreV1().Secrets(ns).Create(ctx, s, metav1.CreateOptions{}); err != nil {
			tb.Fatal(err)
		}
	}
	return names, digest
}
