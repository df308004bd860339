package promscrape

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes/fake"
	"sigs.k8s.io/yaml"
)

// podMonitor is the chart's proxies PodMonitor, as rendered.
const podMonitor = `
apiVersion: monitoring.coreos.com/v1
kind: PodMonitor
metadata: {name: tailplane-proxies, namespace: tailscale}
spec:
  selector:
    matchLabels: {tailscale.com/managed: "true"}
  namespaceSelector: {matchNames: [tailscale]}
  podMetricsEndpoints:
    - targetPort: %d
      path: /metrics
      relabelings:
        - sourceLabels: [__meta_kubernetes_pod_label_tailscale_com_parent_resource]
          targetLabel: parent
        - sourceLabels: [__meta_kubernetes_pod_label_tailscale_com_parent_resource_type]
          targetLabel: parent_type
`

func monitor(t *testing.T, text string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(text), &u.Object); err != nil {
		t.Fatal(err)
	}
	return u
}

func pod(name, ip string, labels map[string]string, phase corev1.PodPhase) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "tailscale", Labels: labels},
		Spec:   corev1.PodSpec{Containers: []corev1.Container{{Name: "tailscale"}}},
		Status: corev1.PodStatus{PodIP: ip, Phase: phase}}
}

var proxyLabels = map[string]string{"tailscale.com/managed": "true", "tailscale.com/parent-resource": "web", "tailscale.com/parent-resource-type": "svc"}

// The PodMonitor's selector, namespace, port and relabelings become file_sd
// targets: only running, selected Pods, with the Operator's labels.
func TestResolvePodMonitor(t *testing.T) {
	kube := fake.NewClientset(
		pod("ts-web-0", "10.0.0.5", proxyLabels, corev1.PodRunning),
		pod("ts-web-1", "", proxyLabels, corev1.PodPending),
		pod("other", "10.0.0.6", map[string]string{"app": "x"}, corev1.PodRunning),
	)
	js, err := jobsOf(monitor(t, fmt.Sprintf(podMonitor, 9002)))
	if err != nil || len(js) != 1 {
		t.Fatalf("jobs %v, %v", js, err)
	}
	ts, err := resolve(context.Background(), kube, js[0])
	if err != nil {
		t.Fatal(err)
	}
	if len(ts) != 1 || ts[0].Targets[0] != "10.0.0.5:9002" {
		t.Fatalf("targets %+v", ts)
	}
	want := map[string]string{"namespace": "tailscale", "pod": "ts-web-0", "container": "tailscale", "parent": "web", "parent_type": "svc"}
	for k, v := range want {
		if ts[0].Labels[k] != v {
			t.Errorf("label %s = %q, want %q (labels %v)", k, ts[0].Labels[k], v, ts[0].Labels)
		}
	}
	if js[0].name != "tailscale/tailplane-proxies" {
		t.Errorf("job %q", js[0].name)
	}
}

// A real prometheus scrapes a "Pod" (a local server) through the PodMonitor.
func TestPrometheusScrapes(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "# TYPE tailplane_proxy_tailnet_online gauge\ntailplane_proxy_tailnet_online 1")
	}))
	defer srv.Close()
	_, portText, _ := net.SplitHostPort(srv.Listener.Addr().String())
	port, _ := strconv.Atoi(portText)
	kube := fake.NewClientset(pod("ts-web-0", "127.0.0.1", proxyLabels, corev1.PodRunning))
	rules := t.TempDir() + "/rules.yaml"
	if err := os.WriteFile(rules, []byte("groups:\n- name: g\n  rules:\n  - alert: Offline\n    expr: tailplane_proxy_tailnet_online == 0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	p, err := Start(ctx, Options{Dir: t.TempDir(), Kube: kube, Monitors: []*unstructured.Unstructured{monitor(t, fmt.Sprintf(podMonitor, port))},
		RuleFiles: []string{rules}, Interval: time.Second, Log: testWriter{t}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Stop()
	for {
		got, err := p.Query(ctx, `tailplane_proxy_tailnet_online{job="tailscale/tailplane-proxies",parent="web",parent_type="svc",pod="ts-web-0"}`)
		if err == nil && len(got) == 1 {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("no scraped series: %v %v", got, err)
		case <-time.After(500 * time.Millisecond):
		}
	}
	rs, err := p.Rules(ctx)
	if err != nil || len(rs) != 1 || rs[0].Name != "Offline" {
		t.Fatalf("rules %+v, %v", rs, err)
	}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) { w.t.Log(string(b)); return len(b), nil }
