package operator

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

// An ExternalName Service with tailscale.com/expose is put on the tailnet,
// forwarding to its externalName, as with the official operator.
var _ = Describe("an exposed ExternalName Service", Ordered, func() {
	BeforeAll(func() {
		out, err := devcluster("kubectl", "apply", "-f", "kind-e2e/operator/testdata/echo.yaml")
		Expect(err).NotTo(HaveOccurred(), out)
		// The Service's cluster DNS name: the proxy's pod resolves it
		// through devcluster's cluster DNS (dnsPolicy ClusterFirst).
		Expect(kubectlApply(`
apiVersion: v1
kind: Service
metadata:
  name: app-alias
  annotations: {tailscale.com/expose: "true"}
spec:
  type: ExternalName
  externalName: my-app.default.svc.cluster.local
  ports: [{port: 80}]
`)).To(Succeed())
	})

	It("forwards tailnet traffic to the externalName", func() {
		Eventually(func() (string, error) {
			return devcluster("kubectl", "get", "svc", "app-alias", "-o", `jsonpath={.status.conditions[?(@.type=="TailscaleProxyReady")].status}`)
		}).WithTimeout(2 * time.Minute).WithPolling(time.Second).Should(Equal("True"))
		Eventually(func() (string, error) {
			return devcluster("curl", "http://default-app-alias.devcluster.ts.net/")
		}).WithTimeout(2 * time.Minute).WithPolling(2 * time.Second).Should(ContainSubstring(`"pod":"my-app-`))
	})
})
