package operator

import (
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	tsapi "tailscale.com/client/tailscale/v2"
)

// A kube-apiserver ProxyGroup in auth mode: a tailnet client reaches the
// cluster's API server at https://<hostname>.<tailnet> through either
// replica, as itself plus the groups its tailnet grant
// (tailscale.com/cap/kubernetes) names, so that cluster RBAC decides.
var _ = Describe("kube-apiserver ProxyGroups", Ordered, func() {
	const ns = "pga-e2e"
	var (
		api    *tsapi.Client
		client *tailnetClient
	)

	BeforeAll(func(ctx SpecContext) {
		api = tailnetAPI()
		before, err := api.PolicyFile().Raw(ctx)
		Expect(err).NotTo(HaveOccurred())
		// The seed's services auto-approver, and a grant of the
		// Kubernetes capability to every device.
		Expect(api.PolicyFile().Set(ctx, `{
			"autoApprovers": {"services": {"tag:k8s": ["tag:k8s"]}},
			"grants": [{"src": ["*"], "dst": ["tag:k8s"],
				"app": {"tailscale.com/cap/kubernetes": [{"impersonate": {"groups": ["e2e-api-readers"]}}]}}],
		}`, "")).To(Succeed())
		DeferCleanup(func(ctx SpecContext) {
			_, _ = devcluster("kubectl", "delete", "--ignore-not-found", "namespace", ns)
			_, _ = devcluster("kubectl", "delete", "--ignore-not-found", "proxygroup", "k8s-api")
			Expect(api.PolicyFile().Set(ctx, before.HuJSON, "")).To(Succeed())
		})
		out, err := devclusterStdin(`apiVersion: tailscale.com/v1alpha1
kind: ProxyGroup
metadata:
  name: k8s-api
spec:
  type: kube-apiserver
  kubeAPIServer:
    mode: auth
---
apiVersion: v1
kind: Namespace
metadata:
  name: `+ns+`
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: configmap-reader
  namespace: `+ns+`
rules:
  - apiGroups: [""]
    resources: [configmaps]
    verbs: [get, list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: e2e-api-readers
  namespace: `+ns+`
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: Role
  name: configmap-reader
subjects:
  - apiGroup: rbac.authorization.k8s.io
    kind: Group
    name: e2e-api-readers
`, "kubectl", "apply", "-f", "-")
		Expect(err).NotTo(HaveOccurred(), out)
		client = newTailnetClient(ctx, "e2e-kubectl")
		DeferCleanup(client.close)
	}, NodeTimeout(2*time.Minute))

	AfterEach(func() {
		if CurrentSpecReport().Failed() {
			out, _ := devcluster("kubectl", "logs", "-n", "tailscale", "-l", "tailscale.com/parent-resource=k8s-api", "--tail=30", "--prefix")
			AddReportEntry("the group's proxy logs", out)
			out, _ = devcluster("kubectl", "get", "clusterrolebinding", "-o", "wide")
			AddReportEntry("cluster role bindings", out)
		}
	})

	It("publishes the URL once a replica serves it", func(ctx SpecContext) {
		Eventually(func() (string, error) {
			return devcluster("kubectl", "get", "proxygroup", "k8s-api", "-o",
				`jsonpath={.status.url} {.status.conditions[?(@.type=="KubeAPIServerProxyConfigured")].status}`)
		}).WithContext(ctx).WithTimeout(3 * time.Minute).WithPolling(time.Second).Should(Equal("https://k8s-api.devcluster.ts.net True"))
	}, SpecTimeout(4*time.Minute))

	It("lets RBAC decide per tailnet caller, with a real certificate", func(ctx SpecContext) {
		base := "https://k8s-api.devcluster.ts.net"
		Eventually(func() (string, error) {
			code, body, _, err := client.get(ctx, base+"/api/v1/namespaces/"+ns+"/configmaps", nil)
			return fmt.Sprintf("%d %.300s", code, body), err
		}).WithContext(ctx).WithTimeout(2 * time.Minute).WithPolling(2 * time.Second).Should(HavePrefix("200 "))
		code, body, _, err := client.get(ctx, base+"/api/v1/namespaces/default/secrets", nil)
		Expect(err).NotTo(HaveOccurred())
		Expect(code).To(Equal(http.StatusForbidden), body)
		Expect(body).To(ContainSubstring(`cannot list resource \"secrets\"`))
		// Impersonation sent by the caller is ignored: it stays itself.
		code, body, _, err = client.get(ctx, base+"/api/v1/namespaces/default/secrets", http.Header{"Impersonate-User": {"admin"}, "Impersonate-Group": {"system:masters"}})
		Expect(err).NotTo(HaveOccurred())
		Expect(code).To(Equal(http.StatusForbidden), fmt.Sprintf("with client impersonation headers: %s", body))
	}, SpecTimeout(3*time.Minute))

	// The benchmark of docs/performance.md: 200 list calls through the
	// auth-mode proxy (impersonating the tailnet caller) next to 200 to the
	// API server directly (admin credentials from devcluster's kubeconfig),
	// alternating, on kept-alive connections.
	It("measures list latency through the proxy next to the API server directly", Label("bench"), func(ctx SpecContext) {
		cfg, err := clientcmd.BuildConfigFromFlags("", filepath.Join(suite.clusterDir(), "kubeconfig"))
		Expect(err).NotTo(HaveOccurred())
		direct, err := rest.HTTPClientFor(cfg)
		Expect(err).NotTo(HaveOccurred())
		path := "/api/v1/namespaces/" + ns + "/configmaps"
		targets := map[string]func() (int, time.Duration, error){
			"through the proxy": func() (int, time.Duration, error) {
				code, _, d, err := client.get(ctx, "https://k8s-api.devcluster.ts.net"+path, nil)
				return code, d, err
			},
			"API server directly": func() (int, time.Duration, error) {
				start := time.Now()
				resp, err := direct.Get(cfg.Host + path)
				if err != nil {
					return 0, 0, err
				}
				_, err = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				return resp.StatusCode, time.Since(start), err
			},
		}
		took := map[string][]time.Duration{}
		for range 200 {
			for name, get := range targets {
				code, d, err := get()
				Expect(err).NotTo(HaveOccurred(), name)
				Expect(code).To(Equal(http.StatusOK), name)
				took[name] = append(took[name], d)
			}
		}
		for name := range targets {
			p50, p99 := percentile(took[name], 50), percentile(took[name], 99)
			AddReportEntry("list latency "+name, fmt.Sprintf("p50 %v p99 %v", p50, p99))
			GinkgoWriter.Printf("BENCH list latency %s: p50 %v p99 %v\n", name, p50.Round(10*time.Microsecond), p99.Round(10*time.Microsecond))
		}
	}, SpecTimeout(3*time.Minute))
})
