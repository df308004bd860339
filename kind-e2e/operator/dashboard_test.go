package operator

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"

	"github.com/tailplane/tailplane/kind-e2e/internal/promscrape"
)

// screenshotsEnv, set to 1, makes the observability spec write screenshots
// of Prometheus's graph page (headless Chromium) into docs/images.
const screenshotsEnv = "TAILPLANE_E2E_SCREENSHOTS"

// Observability as users see it: a real Prometheus scrapes the operator and
// every proxy through the PodMonitors the chart renders (promscrape
// translates them, as no Prometheus Operator runs here), loads the chart's
// alert rules, and every panel of the chart's Grafana dashboard returns
// series while a plugin, an Ingress and a ProxyGroup serve traffic; kubectl
// get -o wide shows each kind's status, address and age.
var _ = Describe("observability", Ordered, func() {
	const ns = "obs-e2e"
	const site, groupSite = "https://obs-e2e-web-ingress.devcluster.ts.net/", "https://obs-pg.devcluster.ts.net/"
	var (
		prom   *promscrape.Prometheus
		kube   kubernetes.Interface
		client *tailnetClient
		panels []panel
	)

	BeforeAll(func(ctx SpecContext) {
		monitors, rules, dash := renderMonitoring(ctx)
		Expect(json.Unmarshal(dash, &struct{ Panels *[]panel }{&panels})).To(Succeed())
		Expect(panels).NotTo(BeEmpty())

		out, err := devcluster("kubectl", "create", "namespace", ns)
		Expect(err).NotTo(HaveOccurred(), out)
		DeferCleanup(func() {
			_, _ = devcluster("kubectl", "delete", "--ignore-not-found", "--wait=false", "-f", "kind-e2e/operator/testdata/observability.yaml")
			_, _ = devcluster("kubectl", "delete", "--ignore-not-found", "--wait=false", "namespace", ns)
		})
		module := buildPlugin(ctx, "./plugins/examples/canary")
		out, err = devcluster("kubectl", "create", "configmap", "-n", ns, "canary-plugin", "--from-file=canary.wasm.gz="+module)
		Expect(err).NotTo(HaveOccurred(), out)
		out, err = devcluster("kubectl", "apply", "-n", ns, "-f", "kind-e2e/operator/testdata/canary.yaml")
		Expect(err).NotTo(HaveOccurred(), out)
		out, err = devcluster("kubectl", "apply", "-f", "kind-e2e/operator/testdata/observability.yaml")
		Expect(err).NotTo(HaveOccurred(), out)

		cfg, err := clientcmd.BuildConfigFromFlags("", filepath.Join(suite.clusterDir(), "kubeconfig"))
		Expect(err).NotTo(HaveOccurred())
		kube, err = kubernetes.NewForConfig(cfg)
		Expect(err).NotTo(HaveOccurred())
		dir := GinkgoT().TempDir()
		rulesFile := filepath.Join(dir, "rules.yaml")
		Expect(os.WriteFile(rulesFile, rules, 0o644)).To(Succeed())
		prom, err = promscrape.Start(ctx, promscrape.Options{Dir: dir, Kube: kube, Monitors: monitors, RuleFiles: []string{rulesFile}, Log: GinkgoWriter})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(prom.Stop)
		client = newTailnetClient(ctx, "e2e-observability")
		DeferCleanup(client.close)
	}, NodeTimeout(6*time.Minute))

	It("scrapes the operator and every proxy through the chart's PodMonitors", func(ctx SpecContext) {
		// Every ready proxy pod serves /healthz on the listener that serves
		// /metrics, so each one must be up. A pod left unready by another
		// spec may be down, as Prometheus would rightly report it.
		Eventually(func() (map[string]map[string]string, error) {
			targets, err := prom.ActiveTargets(ctx)
			if err != nil {
				return nil, err
			}
			ready, err := readyProxyMetricsURLs(ctx, kube)
			if err != nil {
				return nil, err
			}
			proxies := map[string]string{}
			for _, u := range ready {
				proxies[u] = targets["tailscale/tailplane-proxies"][u]
			}
			return map[string]map[string]string{"tailscale/tailplane-operator": targets["tailscale/tailplane-operator"], "ready proxies": proxies}, nil
		}).WithContext(ctx).WithTimeout(4*time.Minute).WithPolling(2*time.Second).Should(And(
			HaveKeyWithValue("tailscale/tailplane-operator", And(Not(BeEmpty()), Not(ContainElement(Not(Equal("up")))))),
			HaveKeyWithValue("ready proxies", And(WithTransform(func(m map[string]string) int { return len(m) }, BeNumerically(">=", 2)), Not(ContainElement(Not(Equal("up")))))),
		), func() string {
			pods, _ := devcluster("kubectl", "get", "pods", "-n", "tailscale", "-o", "wide")
			return "the tailscale namespace's pods:\n" + pods
		})
		Expect(prom.RefreshError()).NotTo(HaveOccurred())
	}, SpecTimeout(5*time.Minute))

	It("answers every dashboard panel with series while traffic flows", func(ctx SpecContext) {
		Eventually(func() []string {
			// Traffic through the plugin's Ingress and the group's.
			for _, target := range []string{site, groupSite} {
				for _, h := range []http.Header{nil, {"X-Canary": {"1"}}} {
					_, _, _, _ = client.get(ctx, target, h)
				}
			}
			return emptyPanels(ctx, prom, panels)
		}).WithContext(ctx).WithTimeout(6*time.Minute).WithPolling(5*time.Second).Should(BeEmpty(), "panels whose query returns no series")
		if os.Getenv(screenshotsEnv) == "1" {
			screenshot(ctx, prom, "metrics-devices-online.png", `sum by (parent_type, parent_namespace, parent) (tailplane_proxy_tailnet_online)`)
			screenshot(ctx, prom, "metrics-requests.png", `sum by (route, code) (rate(tailplane_proxy_requests_total[5m]))`)
		}
	}, SpecTimeout(8*time.Minute))

	It("loads the chart's alert rules, all healthy", func(ctx SpecContext) {
		Eventually(func() ([]string, error) {
			rules, err := prom.Rules(ctx)
			var out []string
			for _, r := range rules {
				out = append(out, r.Name+" "+r.Health+" "+r.LastError)
			}
			return out, err
		}).WithContext(ctx).WithTimeout(time.Minute).WithPolling(2 * time.Second).Should(And(
			HaveLen(7), HaveEach(MatchRegexp(`^Tailplane\w+ ok $`))))
		// Nothing fires on a healthy cluster.
		firing, err := prom.Query(ctx, `ALERTS{alertstate="firing"}`)
		Expect(err).NotTo(HaveOccurred())
		Expect(firing).To(BeEmpty())
	}, SpecTimeout(2*time.Minute))

	It("shows status, address and age in kubectl get -o wide", func(ctx SpecContext) {
		wide := func(args ...string) func() (string, error) {
			return func() (string, error) {
				return devcluster(append([]string{"kubectl", "get", "-o", "wide"}, args...)...)
			}
		}
		// RoutingPlugin (Tailplane's own kind): ready, reason and the
		// serving module's digest.
		Eventually(wide("-n", ns, "routingplugin", "canary")).WithContext(ctx).WithTimeout(2 * time.Minute).WithPolling(2 * time.Second).Should(And(
			MatchRegexp(`(?m)^NAME\s+ORDER\s+POLICY\s+ACCEPTED\s+READY\s+DEGRADED\s+REASON\s+SIZE\s+SHA256\s+AGE$`),
			MatchRegexp(`(?m)^canary\s+\S+\s+\S+\s+True\s+True\s+\S+\s+Loaded\s+\d+\s+[0-9a-f]{64}\s+\d+[smhd]`)))
		// ProxyGroup: the official kind's columns (status, URL, type, age),
		// and with -o wide the pods running of those wanted and the
		// devices' names.
		Eventually(wide("proxygroup", "obs")).WithContext(ctx).WithTimeout(3 * time.Minute).WithPolling(2 * time.Second).Should(And(
			MatchRegexp(`(?m)^NAME\s+STATUS\s+URL\s+TYPE\s+PODS\s+DEVICES\s+AGE$`),
			MatchRegexp(`(?m)^obs\s+ProxyGroupReady\s+(<none>\s+)?ingress\s+1/1 ProxyGroup pods running\s+obs-0\s+\d+[smhd]`)))
		// Without -o wide, exactly the official columns.
		Eventually(func() (string, error) { return devcluster("kubectl", "get", "proxygroup", "obs") }).WithContext(ctx).WithTimeout(time.Minute).WithPolling(2 * time.Second).Should(
			MatchRegexp(`(?m)^NAME\s+STATUS\s+URL\s+TYPE\s+AGE$`))
		// Ingresses: the tailnet hostname as the address.
		Eventually(wide("-n", ns, "ingress")).WithContext(ctx).WithTimeout(3 * time.Minute).WithPolling(2 * time.Second).Should(And(
			MatchRegexp(`(?m)^obs-pg\s+tailscale\s+\S+\s+obs-pg\.devcluster\.ts\.net\s+80, 443\s+\d+[smhd]`),
			MatchRegexp(`(?m)^web\s+tailscale\s+\S+\s+obs-e2e-web-ingress\.devcluster\.ts\.net\s+`)))
		// kubectl describe: the conditions with their reasons and
		// messages, and the Events section.
		Eventually(func() (string, error) {
			return devcluster("kubectl", "describe", "proxygroup", "obs")
		}).WithContext(ctx).WithTimeout(time.Minute).WithPolling(2 * time.Second).Should(And(
			MatchRegexp(`(?m)^\s+Conditions:$`),
			MatchRegexp(`(?m)^\s+Message:\s+\S.*\n\s+Observed Generation:\s+\d+\n\s+Reason:\s+ProxyGroupReady\n\s+Status:\s+True\n\s+Type:\s+ProxyGroupReady$`),
			MatchRegexp(`(?m)^Events:`)))
	}, SpecTimeout(8*time.Minute))
})

// panel is one dashboard panel and its queries.
type panel struct {
	Title   string
	Targets []struct{ Expr string }
}

// emptyPanels lists the panels (title: query) with a query that returns no
// series now, or fails.
func emptyPanels(ctx context.Context, prom *promscrape.Prometheus, panels []panel) []string {
	var out []string
	for _, p := range panels {
		for _, t := range p.Targets {
			got, err := prom.Query(ctx, t.Expr)
			if err != nil || len(got) == 0 {
				out = append(out, fmt.Sprintf("%s: %s (%v)", p.Title, t.Expr, err))
			}
		}
	}
	return out
}

// renderMonitoring renders the chart with its monitoring objects on
// (go run ./deploy/chart/template) and returns the PodMonitors and
// ServiceMonitors, the PrometheusRule's spec as a rule file, and the
// dashboard's JSON.
func renderMonitoring(ctx context.Context) (monitors []*unstructured.Unstructured, rules, dashboard []byte) {
	GinkgoHelper()
	cmd := exec.CommandContext(ctx, "go", "run", "./deploy/chart/template", "--set-string", "oauth.clientId=x", "--set-string", "oauth.clientSecret=y",
		"--set", "monitoring.podMonitor.enabled=true", "--set", "monitoring.prometheusRule.enabled=true", "--set", "monitoring.dashboard.enabled=true")
	cmd.Dir = suite.root
	out, err := cmd.Output()
	Expect(err).NotTo(HaveOccurred(), "go run ./deploy/chart/template: %v", err)
	for _, doc := range strings.Split(string(out), "\n---\n") {
		u := &unstructured.Unstructured{}
		Expect(yaml.Unmarshal([]byte(doc), &u.Object)).To(Succeed())
		switch u.GetKind() {
		case "PodMonitor", "ServiceMonitor":
			monitors = append(monitors, u)
		case "PrometheusRule":
			spec, _, _ := unstructured.NestedMap(u.Object, "spec")
			rules, err = yaml.Marshal(spec)
			Expect(err).NotTo(HaveOccurred())
		case "ConfigMap":
			if u.GetName() == "tailplane-dashboard" {
				s, _, _ := unstructured.NestedString(u.Object, "data", "tailplane.json")
				dashboard = []byte(s)
			}
		}
	}
	Expect(monitors).To(HaveLen(2))
	Expect(rules).NotTo(BeEmpty())
	Expect(dashboard).NotTo(BeEmpty())
	return monitors, rules, dashboard
}

var safeName = regexp.MustCompile(`^[a-z0-9-]+\.png$`)

// screenshot writes docs/images/name: Prometheus's graph page for expr,
// taken with headless Chromium.
func screenshot(ctx context.Context, prom *promscrape.Prometheus, name, expr string) {
	GinkgoHelper()
	Expect(name).To(MatchRegexp(safeName.String()))
	page := prom.URL + "/graph?g0.expr=" + url.QueryEscape(expr) + "&g0.tab=0&g0.range_input=2m"
	path := filepath.Join(suite.root, "docs", "images", name)
	Expect(os.MkdirAll(filepath.Dir(path), 0o755)).To(Succeed())
	cmd := exec.CommandContext(ctx, "chromium", "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
		"--window-size=1400,900", "--virtual-time-budget=15000", "--screenshot="+path, page)
	out, err := cmd.CombinedOutput()
	Expect(err).NotTo(HaveOccurred(), string(out))
	Expect(path).To(BeAnExistingFile())
}

// readyProxyMetricsURLs lists the scrape URLs of the proxies in the
// operator's namespace whose pods are ready and not being deleted: the
// pods the chart's PodMonitor selects (a DNSConfig's nameserver is managed
// too, and serves no metrics).
func readyProxyMetricsURLs(ctx context.Context, kube kubernetes.Interface) ([]string, error) {
	pods, err := kube.CoreV1().Pods("tailscale").List(ctx, metav1.ListOptions{
		LabelSelector: "tailscale.com/managed=true,tailscale.com/parent-resource-type notin (nameserver)"})
	if err != nil {
		return nil, fmt.Errorf("list the proxies' pods: %w", err)
	}
	var out []string
	for _, pod := range pods.Items {
		if pod.DeletionTimestamp != nil || pod.Status.PodIP == "" {
			continue
		}
		for _, c := range pod.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
				out = append(out, "http://"+net.JoinHostPort(pod.Status.PodIP, "9002")+"/metrics")
			}
		}
	}
	return out, nil
}
