package operator

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"tailscale.com/net/socks5"
)

// The official e2e suite's TestProxy on devcluster: the chart's
// apiServerProxyConfig.mode "true", set in the devcluster folder's
// values.yaml and installed as `go tool task dev` installs it, puts the
// Kubernetes API on the operator's own tailnet device with a certificate
// from devcluster's ACME server (proxyConfig.acmeDirectoryURL: the
// operator's container gets it too). A tailnet client then uses kubectl
// through that device as itself plus the groups of its
// tailscale.com/cap/kubernetes grant: RBAC lets that group read Secrets in
// namespace tailscale, and nowhere else.
var _ = Describe("the operator's API server proxy", Ordered, func() {
	const group = "ts:e2e-test-proxy"
	var kubeconfig string

	BeforeAll(func(ctx SpecContext) {
		api := tailnetAPI()
		before, err := api.PolicyFile().Raw(ctx)
		Expect(err).NotTo(HaveOccurred())
		// The official e2e policy's grant, from every device (no "ip":
		// devcluster keeps its allow-all packet filter).
		Expect(api.PolicyFile().Set(ctx, `{
			"grants": [{"src": ["*"], "dst": ["tag:k8s-operator"],
				"app": {"tailscale.com/cap/kubernetes": [{"impersonate": {"groups": ["`+group+`"]}}]}}],
		}`, "")).To(Succeed())
		DeferCleanup(func(ctx SpecContext) {
			Expect(api.PolicyFile().Set(ctx, before.HuJSON, "")).To(Succeed())
		})
		Expect(kubectlApply(`apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: read-secrets
  namespace: tailscale
rules:
  - apiGroups: [""]
    resources: [secrets]
    verbs: [get]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: read-secrets
  namespace: tailscale
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: Role
  name: read-secrets
subjects:
  - apiGroup: rbac.authorization.k8s.io
    kind: Group
    name: ` + group + `
`)).To(Succeed())
		DeferCleanup(func() {
			_, _ = devcluster("kubectl", "delete", "--ignore-not-found", "-n", "tailscale", "rolebinding/read-secrets", "role/read-secrets")
		})

		setAPIServerProxyMode(ctx, "true")

		// kubectl reaches the tailnet through a SOCKS5 proxy that dials
		// with a tailnet client, as through `devcluster join`'s. Its
		// token is a placeholder, as `tailscale configure kubeconfig`
		// writes: in auth mode the proxy sends the operator's own
		// credentials (without one, kubectl asks for a password).
		client := newTailnetClient(ctx, "e2e-apiserver-proxy")
		DeferCleanup(client.close)
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(ln.Close)
		go func() { _ = (&socks5.Server{Dialer: client.node.Dial, Logf: func(string, ...any) {}}).Serve(ln) }()

		operator := strings.TrimSuffix(deviceNamed(ctx, api, "tailscale-operator").Name, ".")
		kubeconfig = filepath.Join(GinkgoT().TempDir(), "kubeconfig")
		Expect(os.WriteFile(kubeconfig, fmt.Appendf(nil, `apiVersion: v1
kind: Config
clusters:
  - name: tailnet
    cluster:
      server: https://%s
      certificate-authority: %s
      proxy-url: socks5://%s
users:
  - name: tailnet
    user: {token: unused}
contexts:
  - name: tailnet
    context: {cluster: tailnet, user: tailnet}
current-context: tailnet
`, operator, tailnetEnv()["TS_CA_FILE"], ln.Addr()), 0o600)).To(Succeed())
	}, NodeTimeout(6*time.Minute))

	AfterEach(func() {
		if CurrentSpecReport().Failed() {
			out, _ := devcluster("kubectl", "logs", "-n", "tailscale", "deploy/operator", "--tail=60")
			AddReportEntry("the operator's log", out)
		}
	})

	It("serves kubectl as the caller, with the groups of its grant", func(ctx SpecContext) {
		// The first request waits for the device's certificate.
		Eventually(func(g Gomega) {
			out, err := devcluster("kubectl", "--kubeconfig", kubeconfig, "--request-timeout=20s",
				"get", "secret", "operator", "-n", "tailscale", "-o", "jsonpath={.metadata.name}")
			g.Expect(err).NotTo(HaveOccurred(), out)
			g.Expect(out).To(Equal("operator"))
		}).WithContext(ctx).WithTimeout(3 * time.Minute).WithPolling(2 * time.Second).Should(Succeed())
		out, err := devcluster("kubectl", "--kubeconfig", kubeconfig, "--request-timeout=20s", "get", "secret", "operator", "-n", "default")
		Expect(err).To(HaveOccurred(), out)
		Expect(out).To(ContainSubstring("(Forbidden)"))
		Expect(out).To(ContainSubstring(`cannot get resource "secrets" in API group "" in the namespace "default"`))
	}, SpecTimeout(4*time.Minute))
})

// setAPIServerProxyMode installs the chart again, as `go tool task dev`
// does (deploy/manifests/devinstall), with apiServerProxyConfig.mode added
// to the devcluster folder's values.yaml; the folder's values.yaml as it was
// is installed again at the end of the container.
func setAPIServerProxyMode(ctx context.Context, mode string) {
	GinkgoHelper()
	path := filepath.Join(suite.clusterDir(), "values.yaml")
	before, err := os.ReadFile(path)
	existed := err == nil
	if !existed {
		Expect(errors.Is(err, os.ErrNotExist)).To(BeTrue(), "read %s: %v", path, err)
	}
	Expect(string(before)).NotTo(ContainSubstring("apiServerProxyConfig"), "%s sets the API server proxy already", path)
	Expect(os.WriteFile(path, fmt.Appendf(before, "\napiServerProxyConfig:\n  mode: %q\n", mode), 0o644)).To(Succeed())
	DeferCleanup(func(ctx SpecContext) {
		if existed {
			Expect(os.WriteFile(path, before, 0o644)).To(Succeed())
		} else {
			Expect(os.Remove(path)).To(Succeed())
		}
		devinstall(ctx)
	}, NodeTimeout(4*time.Minute))
	devinstall(ctx)
	Expect(devcluster("kubectl", "-n", "tailscale", "get", "deployment", "operator", "-o",
		`jsonpath={.spec.template.spec.containers[0].env[?(@.name=="APISERVER_PROXY")].value}`)).To(Equal(mode))
}

// devinstall installs (upgrades) the chart into the suite's cluster as `go
// tool task dev` does, waiting for the operator.
func devinstall(ctx context.Context) { devinstallWith(ctx) }
