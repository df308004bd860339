package operator

import (
	"context"
	"os/exec"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

// Workload identity federation (docs/operator.md, oauth.audience and the
// Tailnet Secret's audience): devcluster's tailnet API trusts the cluster's
// own ServiceAccount issuer, checking each token against the
// kube-apiserver's OIDC discovery document and JWKS. A Tailnet whose
// Secret holds only client_id and audience is valid and its ProxyGroup gets
// its device; a wrong audience is refused with the exchange's reason; and
// the chart installed with oauth.audience runs the operator without any
// client secret, still making devices.
var _ = Describe("Workload identity federation", Ordered, func() {
	const (
		tailnetName = "federated"
		secretName  = "federated-credentials"
		group       = "federated-pg"
	)
	var env map[string]string

	BeforeAll(func() {
		env = tailnetEnv()
		Expect(env).To(HaveKey("TS_API_FEDERATED_CLIENT_ID"), "devcluster's tailnet.env names its workload identity client")
		DeferCleanup(func() {
			_, _ = devcluster("kubectl", "delete", "--ignore-not-found", "proxygroup", group)
			_, _ = devcluster("kubectl", "delete", "--ignore-not-found", "tailnet", tailnetName)
			_, _ = devcluster("kubectl", "delete", "--ignore-not-found", "secret", "-n", "tailscale", secretName)
		})
	})

	secret := func(audience string) {
		GinkgoHelper()
		_, _ = devcluster("kubectl", "delete", "--ignore-not-found", "secret", "-n", "tailscale", secretName)
		out, err := devcluster("kubectl", "create", "secret", "generic", "-n", "tailscale", secretName,
			"--from-literal=client_id="+env["TS_API_FEDERATED_CLIENT_ID"], "--from-literal=audience="+audience)
		Expect(err).NotTo(HaveOccurred(), out)
	}
	tailnetReady := func() (string, error) {
		return devcluster("kubectl", "get", "tailnet", tailnetName, "-o",
			`jsonpath={.status.conditions[?(@.type=="TailnetReady")].status} {.status.conditions[?(@.type=="TailnetReady")].reason} {.status.conditions[?(@.type=="TailnetReady")].message}`)
	}

	It("makes a Tailnet with an audience and no client secret valid, and its ProxyGroup's device", func(ctx SpecContext) {
		secret("some-other-audience")
		out, err := devclusterStdin(`apiVersion: tailscale.com/v1alpha1
kind: Tailnet
metadata: {name: `+tailnetName+`}
spec:
  loginUrl: `+env["TS_CONTROL_URL"]+`
  credentials: {secretName: `+secretName+`}
`, "kubectl", "apply", "-f", "-")
		Expect(err).NotTo(HaveOccurred(), out)
		// A token for another audience: the exchange refuses it, and the
		// Tailnet says why.
		Eventually(tailnetReady).WithContext(ctx).WithTimeout(time.Minute).WithPolling(time.Second).
			Should(And(HavePrefix("False InvalidOAuth "), ContainSubstring("identity token refused")))

		secret(env["TS_API_FEDERATED_AUDIENCE"])
		Eventually(tailnetReady).WithContext(ctx).WithTimeout(time.Minute).WithPolling(time.Second).Should(HavePrefix("True TailnetValid"))
		out, err = devclusterStdin(`apiVersion: tailscale.com/v1alpha1
kind: ProxyGroup
metadata: {name: `+group+`}
spec: {type: egress, replicas: 1, tailnet: `+tailnetName+`}
`, "kubectl", "apply", "-f", "-")
		Expect(err).NotTo(HaveOccurred(), out)
		Eventually(func() (string, error) {
			return devcluster("kubectl", "get", "proxygroup", group, "-o",
				`jsonpath={.status.conditions[?(@.type=="ProxyGroupReady")].reason} {.status.devices[*].hostname}`)
		}).WithContext(ctx).WithTimeout(3 * time.Minute).WithPolling(time.Second).Should(Equal("ProxyGroupReady " + group + "-0"))
		Eventually(func() ([]string, error) { return deviceHostnames(ctx, tailnetAPI()) }).WithContext(ctx).
			WithTimeout(time.Minute).WithPolling(time.Second).Should(ContainElement(group + "-0"))
		out, err = devcluster("kubectl", "delete", "proxygroup", group, "--wait=true")
		Expect(err).NotTo(HaveOccurred(), out)
		Eventually(func() ([]string, error) { return deviceHostnames(ctx, tailnetAPI()) }).WithContext(ctx).
			WithTimeout(time.Minute).WithPolling(time.Second).ShouldNot(ContainElement(group + "-0"))
	}, SpecTimeout(6*time.Minute))

	It("runs the operator installed with oauth.audience, with no client secret anywhere", func(ctx SpecContext) {
		skipIfExternal("reinstalls the chart with devinstall")
		DeferCleanup(func(ctx SpecContext) { devinstallWith(ctx) }, NodeTimeout(4*time.Minute))
		devinstallWith(ctx, "--workload-identity")
		out, err := devcluster("kubectl", "-n", "tailscale", "get", "deployment", "operator", "-o",
			`jsonpath={range .spec.template.spec.containers[0].env[*]}{.name}={.value} {end}`)
		Expect(err).NotTo(HaveOccurred(), out)
		Expect(out).To(ContainSubstring("CLIENT_ID=" + env["TS_API_FEDERATED_CLIENT_ID"]))
		Expect(out).NotTo(ContainSubstring("CLIENT_SECRET_FILE"))
		out, err = devcluster("kubectl", "-n", "tailscale", "get", "secrets", "-o", `jsonpath={range .items[*]}{.metadata.name}:{.data.client_secret} {end}`)
		Expect(err).NotTo(HaveOccurred(), out)
		for _, s := range strings.Fields(out) {
			name, value, _ := strings.Cut(s, ":")
			Expect(value).To(BeEmpty(), "Secret %s holds a client secret", name)
		}
		// The operator works: an exposed Service gets its device.
		out, err = devclusterStdin(`apiVersion: v1
kind: Service
metadata:
  name: federated-expose
  annotations: {tailscale.com/expose: "true"}
spec:
  selector: {app: my-app}
  ports: [{port: 80, targetPort: 8080}]
`, "kubectl", "apply", "-f", "-")
		Expect(err).NotTo(HaveOccurred(), out)
		DeferCleanup(func() { _, _ = devcluster("kubectl", "delete", "--ignore-not-found", "service", "federated-expose") })
		Eventually(func() ([]string, error) { return deviceHostnames(ctx, tailnetAPI()) }).WithContext(ctx).
			WithTimeout(3 * time.Minute).WithPolling(time.Second).Should(ContainElement("default-federated-expose"))
		out, err = devcluster("kubectl", "delete", "service", "federated-expose", "--wait=true")
		Expect(err).NotTo(HaveOccurred(), out)
		Eventually(func() ([]string, error) { return deviceHostnames(ctx, tailnetAPI()) }).WithContext(ctx).
			WithTimeout(time.Minute).WithPolling(time.Second).ShouldNot(ContainElement("default-federated-expose"))
	}, SpecTimeout(8*time.Minute))
})

// devinstallWith installs (upgrades) the chart into the suite's cluster as
// `go tool task dev` does, with devinstall's extra flags, waiting for the
// operator.
func devinstallWith(ctx context.Context, flags ...string) {
	GinkgoHelper()
	cmd := exec.CommandContext(ctx, "go", append([]string{"run", "./deploy/manifests/devinstall", "--dir", suite.clusterDir()}, flags...)...)
	cmd.Dir = suite.root
	out, err := cmd.CombinedOutput()
	Expect(err).NotTo(HaveOccurred(), string(out))
	Expect(string(out)).To(ContainSubstring("operator is installed"))
}
