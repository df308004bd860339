// Package promscrape runs a real Prometheus (Debian's prometheus 2.x, whose
// Kubernetes service discovery needs in-cluster credentials it cannot get on
// devcluster) that scrapes what the chart's PodMonitors and ServiceMonitors
// select, as the Prometheus Operator would: each monitor endpoint becomes
// a scrape job whose targets are written as file_sd files, resolved from
// the API (Pods, or a Service's EndpointSlices) and refreshed every few
// seconds, with the operator's job, namespace, pod, container and endpoint
// labels and the endpoint's replace relabelings from Pod labels applied.
// Rule files load as they are (a PrometheusRule's spec is a rule file).
//
// It imports client-go, apimachinery and the standard library.
package promscrape

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"
)

// Options configure a Prometheus.
type Options struct {
	// Binary is the prometheus executable; empty means "prometheus" on PATH.
	Binary string
	// Dir holds the config, the target files and the TSDB.
	Dir string
	// Kube reads Pods, Services and EndpointSlices.
	Kube kubernetes.Interface
	// Monitors are PodMonitor and ServiceMonitor objects (monitoring.coreos.com/v1).
	Monitors []*unstructured.Unstructured
	// RuleFiles are Prometheus rule files (groups: ...).
	RuleFiles []string
	// Interval is the scrape and rule evaluation interval; default 5s. An
	// endpoint's own interval is ignored: tests want fresh samples.
	Interval time.Duration
	// Log receives Prometheus's output; nil discards it.
	Log io.Writer
}

// Prometheus is a running prometheus process.
type Prometheus struct {
	// URL is its HTTP API's base, http://127.0.0.1:PORT.
	URL string

	opts   Options
	jobs   []job
	cmd    *exec.Cmd
	cancel context.CancelFunc
	done   chan struct{}
	mu     sync.Mutex
	err    error // the last refresh's error
}

// job is one monitor endpoint.
type job struct {
	name      string // the Prometheus Operator's: <namespace>/<monitor>
	monitor   *unstructured.Unstructured
	kind      string // PodMonitor or ServiceMonitor
	endpoint  map[string]any
	index     int
	file      string
	path      string
	namespace []string
	selector  labels.Selector
}

// Target is one scrape target as written to a file_sd file.
type Target struct {
	Targets []string          `json:"targets"`
	Labels  map[string]string `json:"labels"`
}

// Start writes the config, resolves the targets once and starts
// prometheus; it returns when Prometheus answers /-/ready. Targets are
// refreshed every Interval until Stop.
func Start(ctx context.Context, opts Options) (*Prometheus, error) {
	if opts.Binary == "" {
		opts.Binary = "prometheus"
	}
	if opts.Interval == 0 {
		opts.Interval = 5 * time.Second
	}
	if opts.Log == nil {
		opts.Log = io.Discard
	}
	p := &Prometheus{opts: opts, done: make(chan struct{})}
	if err := os.MkdirAll(filepath.Join(opts.Dir, "targets"), 0o755); err != nil {
		return nil, err
	}
	for _, m := range opts.Monitors {
		js, err := jobsOf(m)
		if err != nil {
			return nil, err
		}
		for i := range js {
			js[i].file = filepath.Join(opts.Dir, "targets", strings.NewReplacer("/", "_").Replace(js[i].name)+"-"+strconv.Itoa(js[i].index)+".json")
		}
		p.jobs = append(p.jobs, js...)
	}
	if err := p.Refresh(ctx); err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	cfgPath := filepath.Join(opts.Dir, "prometheus.yml")
	if err := os.WriteFile(cfgPath, p.config(), 0o644); err != nil {
		return nil, err
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	p.URL = "http://" + addr
	rctx, cancel := context.WithCancel(context.Background())
	p.cancel = cancel
	p.cmd = exec.CommandContext(rctx, opts.Binary, "--config.file="+cfgPath, "--storage.tsdb.path="+filepath.Join(opts.Dir, "data"),
		"--web.listen-address="+addr, "--web.enable-lifecycle")
	p.cmd.Stdout, p.cmd.Stderr = opts.Log, opts.Log
	if err := p.cmd.Start(); err != nil {
		cancel()
		return nil, fmt.Errorf("start %s: %w", opts.Binary, err)
	}
	exited := make(chan struct{})
	go func() { _ = p.cmd.Wait(); close(exited) }()
	go p.refreshLoop(rctx, exited)
	for {
		if resp, err := http.Get(p.URL + "/-/ready"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return p, nil
			}
		}
		select {
		case <-exited:
			cancel()
			return nil, errors.New("prometheus exited before it was ready")
		case <-ctx.Done():
			p.Stop()
			return nil, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func (p *Prometheus) refreshLoop(ctx context.Context, exited chan struct{}) {
	defer close(p.done)
	t := time.NewTicker(p.opts.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			<-exited
			return
		case <-exited:
			return
		case <-t.C:
		}
		err := p.Refresh(ctx)
		p.mu.Lock()
		p.err = err
		p.mu.Unlock()
	}
}

// Stop ends prometheus and the refreshes.
func (p *Prometheus) Stop() {
	if p.cancel != nil {
		p.cancel()
		<-p.done
	}
}

// Jobs names the scrape jobs, one per monitor endpoint.
func (p *Prometheus) Jobs() []string {
	var out []string
	for _, j := range p.jobs {
		out = append(out, j.name)
	}
	return out
}

// config is prometheus.yml: one job per monitor endpoint, on file_sd.
func (p *Prometheus) config() []byte {
	iv := p.opts.Interval.String()
	var scrapes []map[string]any
	for _, j := range p.jobs {
		scrapes = append(scrapes, map[string]any{
			"job_name":        j.name + "/" + strconv.Itoa(j.index),
			"scrape_interval": iv,
			"metrics_path":    j.path,
			"honor_labels":    false,
			"file_sd_configs": []any{map[string]any{"files": []string{j.file}, "refresh_interval": iv}},
			// The job label is the Operator's, not the job's unique name.
			"relabel_configs": []any{map[string]any{"target_label": "job", "replacement": j.name}},
		})
	}
	cfg := map[string]any{
		"global":         map[string]any{"scrape_interval": iv, "evaluation_interval": iv},
		"rule_files":     p.opts.RuleFiles,
		"scrape_configs": scrapes,
	}
	b, _ := yaml.Marshal(cfg)
	return b
}

func jobsOf(m *unstructured.Unstructured) ([]job, error) {
	kind := m.GetKind()
	field := map[string]string{"PodMonitor": "podMetricsEndpoints", "ServiceMonitor": "endpoints"}[kind]
	if field == "" {
		return nil, fmt.Errorf("%s %s: not a PodMonitor or ServiceMonitor", kind, m.GetName())
	}
	var sel metav1.LabelSelector
	raw, _, _ := unstructured.NestedMap(m.Object, "spec", "selector")
	if err := runtimeConvert(raw, &sel); err != nil {
		return nil, fmt.Errorf("%s %s: selector: %w", kind, m.GetName(), err)
	}
	selector, err := metav1.LabelSelectorAsSelector(&sel)
	if err != nil {
		return nil, fmt.Errorf("%s %s: selector: %w", kind, m.GetName(), err)
	}
	namespaces, _, _ := unstructured.NestedStringSlice(m.Object, "spec", "namespaceSelector", "matchNames")
	if len(namespaces) == 0 {
		namespaces = []string{m.GetNamespace()}
	}
	eps, _, _ := unstructured.NestedSlice(m.Object, "spec", field)
	var out []job
	for i, e := range eps {
		ep, _ := e.(map[string]any)
		path, _ := ep["path"].(string)
		if path == "" {
			path = "/metrics"
		}
		out = append(out, job{name: m.GetNamespace() + "/" + m.GetName(), monitor: m, kind: kind, endpoint: ep, index: i,
			path: path, namespace: namespaces, selector: selector})
	}
	return out, nil
}

func runtimeConvert(in map[string]any, out any) error {
	b, err := json.Marshal(in)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, out)
}

// Refresh resolves every job's targets and rewrites its file_sd file
// (Prometheus reads it again within Interval).
func (p *Prometheus) Refresh(ctx context.Context) error {
	var errs []error
	for _, j := range p.jobs {
		ts, err := resolve(ctx, p.opts.Kube, j)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		b, _ := json.Marshal(ts)
		tmp := j.file + ".tmp"
		if err := os.WriteFile(tmp, b, 0o644); err != nil {
			errs = append(errs, err)
			continue
		}
		if err := os.Rename(tmp, j.file); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// resolve returns j's targets now.
func resolve(ctx context.Context, kube kubernetes.Interface, j job) ([]Target, error) {
	var out []Target
	for _, ns := range j.namespace {
		var ts []Target
		var err error
		if j.kind == "PodMonitor" {
			ts, err = podTargets(ctx, kube, ns, j)
		} else {
			ts, err = serviceTargets(ctx, kube, ns, j)
		}
		if err != nil {
			return nil, err
		}
		out = append(out, ts...)
	}
	sort.Slice(out, func(a, b int) bool { return out[a].Targets[0] < out[b].Targets[0] })
	if out == nil {
		out = []Target{}
	}
	return out, nil
}

func podTargets(ctx context.Context, kube kubernetes.Interface, ns string, j job) ([]Target, error) {
	pods, err := kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: j.selector.String()})
	if err != nil {
		return nil, fmt.Errorf("%s: list Pods: %w", j.name, err)
	}
	var out []Target
	for _, pod := range pods.Items {
		if pod.Status.PodIP == "" || pod.Status.Phase != corev1.PodRunning || pod.DeletionTimestamp != nil {
			continue
		}
		port, container, portName := podPort(&pod, j.endpoint)
		if port == 0 {
			continue
		}
		l := map[string]string{"namespace": pod.Namespace, "pod": pod.Name, "container": container}
		if portName != "" {
			l["endpoint"] = portName
		}
		relabel(l, j.endpoint, pod.Labels)
		out = append(out, Target{Targets: []string{net.JoinHostPort(pod.Status.PodIP, strconv.Itoa(port))}, Labels: l})
	}
	return out, nil
}

// podPort finds the endpoint's port on pod: by name (port) or number
// (portNumber, targetPort).
func podPort(pod *corev1.Pod, ep map[string]any) (port int, container, name string) {
	name, _ = ep["port"].(string)
	want := 0
	for _, k := range []string{"portNumber", "targetPort"} {
		switch v := ep[k].(type) {
		case float64:
			want = int(v)
		case int64:
			want = int(v)
		case int:
			want = v
		case string:
			if name == "" {
				name = v
			}
		}
	}
	for _, c := range pod.Spec.Containers {
		for _, cp := range c.Ports {
			if (name != "" && cp.Name == name) || (want != 0 && int(cp.ContainerPort) == want) {
				return int(cp.ContainerPort), c.Name, cp.Name
			}
		}
	}
	if want != 0 && len(pod.Spec.Containers) > 0 {
		// A port the container serves without declaring it.
		return want, pod.Spec.Containers[0].Name, ""
	}
	return 0, "", ""
}

var invalidLabelChars = regexp.MustCompile(`[^a-zA-Z0-9_]`)

// relabel applies the endpoint's replace relabelings whose sources are
// Pod labels (__meta_kubernetes_pod_label_*), the ones the chart uses.
func relabel(l map[string]string, ep map[string]any, podLabels map[string]string) {
	meta := map[string]string{}
	for k, v := range podLabels {
		meta["__meta_kubernetes_pod_label_"+invalidLabelChars.ReplaceAllString(k, "_")] = v
	}
	rs, _ := ep["relabelings"].([]any)
	for _, r := range rs {
		rl, _ := r.(map[string]any)
		if a, _ := rl["action"].(string); a != "" && strings.ToLower(a) != "replace" {
			continue
		}
		target, _ := rl["targetLabel"].(string)
		srcs, _ := rl["sourceLabels"].([]any)
		var vals []string
		for _, s := range srcs {
			name, _ := s.(string)
			vals = append(vals, meta[name])
		}
		if target == "" || len(vals) == 0 {
			continue
		}
		if v := strings.Join(vals, ";"); v != "" {
			l[target] = v
		}
	}
}

func serviceTargets(ctx context.Context, kube kubernetes.Interface, ns string, j job) ([]Target, error) {
	svcs, err := kube.CoreV1().Services(ns).List(ctx, metav1.ListOptions{LabelSelector: j.selector.String()})
	if err != nil {
		return nil, fmt.Errorf("%s: list Services: %w", j.name, err)
	}
	portName, _ := j.endpoint["port"].(string)
	var out []Target
	for _, svc := range svcs.Items {
		slices, err := kube.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + svc.Name})
		if err != nil {
			return nil, fmt.Errorf("%s: list EndpointSlices of %s: %w", j.name, svc.Name, err)
		}
		for _, es := range slices.Items {
			port := 0
			for _, p := range es.Ports {
				if p.Port != nil && (portName == "" || (p.Name != nil && *p.Name == portName)) {
					port = int(*p.Port)
					break
				}
			}
			if port == 0 {
				continue
			}
			for _, e := range es.Endpoints {
				if e.Conditions.Ready != nil && !*e.Conditions.Ready || len(e.Addresses) == 0 {
					continue
				}
				l := map[string]string{"namespace": ns, "service": svc.Name}
				if portName != "" {
					l["endpoint"] = portName
				}
				if e.TargetRef != nil && e.TargetRef.Kind == "Pod" {
					l["pod"] = e.TargetRef.Name
				}
				out = append(out, Target{Targets: []string{net.JoinHostPort(e.Addresses[0], strconv.Itoa(port))}, Labels: l})
			}
		}
	}
	return out, nil
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// Sample is one series of a query's answer.
type Sample struct {
	Metric map[string]string `json:"metric"`
	Value  []any             `json:"value"`
}

// Query runs an instant query and returns its series.
func (p *Prometheus) Query(ctx context.Context, expr string) ([]Sample, error) {
	var res struct {
		Status    string `json:"status"`
		Error     string `json:"error"`
		ErrorType string `json:"errorType"`
		Data      struct {
			ResultType string   `json:"resultType"`
			Result     []Sample `json:"result"`
		} `json:"data"`
	}
	if err := p.get(ctx, "/api/v1/query?query="+url.QueryEscape(expr), &res); err != nil {
		return nil, err
	}
	if res.Status != "success" {
		return nil, fmt.Errorf("query %q: %s: %s", expr, res.ErrorType, res.Error)
	}
	return res.Data.Result, nil
}

// Rule is one loaded rule and its health.
type Rule struct {
	Name      string `json:"name"`
	Type      string `json:"type"`
	Health    string `json:"health"`
	LastError string `json:"lastError"`
}

// Rules lists the loaded rules.
func (p *Prometheus) Rules(ctx context.Context) ([]Rule, error) {
	var res struct {
		Status string `json:"status"`
		Data   struct {
			Groups []struct {
				Rules []Rule `json:"rules"`
			} `json:"groups"`
		} `json:"data"`
	}
	if err := p.get(ctx, "/api/v1/rules", &res); err != nil {
		return nil, err
	}
	var out []Rule
	for _, g := range res.Data.Groups {
		out = append(out, g.Rules...)
	}
	return out, nil
}

// ActiveTargets lists the scrape targets Prometheus has, with their health
// ("up", "down", "unknown"): job -> scrape URL -> health. A target that is
// not up also names its pod and the last scrape's error, e.g.
// "down pod=tailscale/web-0: connection refused", so a failing check says
// which one and why.
func (p *Prometheus) ActiveTargets(ctx context.Context) (map[string]map[string]string, error) {
	var res struct {
		Data struct {
			ActiveTargets []struct {
				Labels    map[string]string `json:"labels"`
				ScrapeURL string            `json:"scrapeUrl"`
				Health    string            `json:"health"`
				LastError string            `json:"lastError"`
			} `json:"activeTargets"`
		} `json:"data"`
	}
	if err := p.get(ctx, "/api/v1/targets?state=active", &res); err != nil {
		return nil, err
	}
	out := map[string]map[string]string{}
	for _, t := range res.Data.ActiveTargets {
		if out[t.Labels["job"]] == nil {
			out[t.Labels["job"]] = map[string]string{}
		}
		health := t.Health
		if health != "up" {
			health += " pod=" + t.Labels["namespace"] + "/" + t.Labels["pod"]
			if t.LastError != "" {
				health += ": " + t.LastError
			}
		}
		out[t.Labels["job"]][t.ScrapeURL] = health
	}
	return out, nil
}

// RefreshError is the last background refresh's error, nil if it worked.
func (p *Prometheus) RefreshError() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

func (p *Prometheus) get(ctx context.Context, path string, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.URL+path, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("GET %s: %d %s", path, resp.StatusCode, strings.TrimSpace(string(b)))
	}
	return nil
}
