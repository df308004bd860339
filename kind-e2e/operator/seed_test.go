package operator

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

var _ = Describe("the seed's examples", Ordered, func() {
	BeforeAll(func() {
		out, err := devcluster("kubectl", "apply", "-f", "kind-e2e/operator/testdata/echo.yaml",
			"-f", "examples/seed/01-service-expose.yaml", "-f", "examples/seed/03-ingress.yaml")
		Expect(err).NotTo(HaveOccurred(), out)
	})

	It("puts the exposed Service on the tailnet", func() {
		Eventually(func() (string, error) {
			return devcluster("kubectl", "get", "svc", "postgres", "-o", `jsonpath={.status.conditions[?(@.type=="TailscaleProxyReady")].status}`)
		}).WithTimeout(2 * time.Minute).WithPolling(time.Second).Should(Equal("True"))
		Eventually(func() (string, error) {
			return devcluster("curl", "http://default-postgres.devcluster.ts.net:5432/")
		}).WithTimeout(2 * time.Minute).WithPolling(2 * time.Second).Should(ContainSubstring(`"pod":"postgres-`))
	})

	It("serves the Ingress over tailnet HTTPS with a real certificate", func() {
		Eventually(func() (string, error) {
			return devcluster("kubectl", "get", "ingress", "my-app", "-o", "jsonpath={.status.loadBalancer.ingress[0].hostname}")
		}).WithTimeout(2 * time.Minute).WithPolling(time.Second).Should(Equal("my-app.devcluster.ts.net"))
		Eventually(func() (string, error) {
			return devcluster("curl", "https://my-app.devcluster.ts.net/")
		}).WithTimeout(3 * time.Minute).WithPolling(2 * time.Second).Should(ContainSubstring(`"pod":"my-app-`))
	})

	It("still serves both after Ctrl-C and go tool task dev again: the same tailnet, devices and CA", func(ctx SpecContext) {
		api := tailnetAPI()
		ingressID, serviceID := deviceID(ctx, api, "my-app"), deviceID(ctx, api, "default-postgres")
		Expect(suite.stopDev()).To(BeTrue(), "`go tool task dev` did not stop within a minute of Ctrl-C")
		Expect(suite.exitErr).NotTo(HaveOccurred(), "`go tool task dev` after Ctrl-C")
		suite.startDev(ctx)
		// The Ingress proxy serves the certificate it got before the restart
		// (kept in its state Secret); curl verifies it with the ca.pem the
		// resumed devcluster wrote.
		Eventually(func() (string, error) {
			return devcluster("curl", "https://my-app.devcluster.ts.net/")
		}).WithTimeout(2 * time.Minute).WithPolling(2 * time.Second).Should(ContainSubstring(`"pod":"my-app-`))
		Eventually(func() (string, error) {
			return devcluster("curl", "http://default-postgres.devcluster.ts.net:5432/")
		}).WithTimeout(2 * time.Minute).WithPolling(2 * time.Second).Should(ContainSubstring(`"pod":"postgres-`))
		api = tailnetAPI() // the API's address may have changed
		Expect(deviceID(ctx, api, "my-app")).To(Equal(ingressID), "the Ingress proxy's device")
		Expect(deviceID(ctx, api, "default-postgres")).To(Equal(serviceID), "the exposed Service proxy's device")
	}, SpecTimeout(8*time.Minute))
})
