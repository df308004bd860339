package operator

import (
	"fmt"
	"net/http"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
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
})
