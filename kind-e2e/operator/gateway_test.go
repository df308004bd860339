package operator

import (
	"fmt"
	"net/http"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

// docs/gateway.md's walkthrough on devcluster: the chart's GatewayClass,
// a Gateway on its own tailnet device with HTTPS (the tailnet's
// certificate) and HTTP listeners, an HTTPRoute splitting 90/10 between
// two Services by weight and sending "X-Canary: always" to the canary;
// then the canary Service deleted (its share answers 500, the route says
// BackendNotFound) and re-created, and the Gateway deleted with its device.
var _ = Describe("a Gateway with a weighted canary", Ordered, func() {
	const (
		manifest = "examples/gateway/01-canary.yaml"
		site     = "https://default-edge-gateway.devcluster.ts.net/"
		plain    = "http://default-edge-gateway.devcluster.ts.net/"
	)
	var client *tailnetClient

	BeforeAll(func(ctx SpecContext) {
		out, err := devcluster("kubectl", "apply", "-f", manifest)
		Expect(err).NotTo(HaveOccurred(), out)
		client = newTailnetClient(ctx, "e2e-gateway")
		DeferCleanup(client.close)
	}, NodeTimeout(3*time.Minute))

	It("is Programmed with its device's addresses, and its route Accepted", func(ctx SpecContext) {
		Eventually(func() (string, error) {
			return devcluster("kubectl", "get", "gateway", "edge", "-o",
				`jsonpath={.status.conditions[?(@.type=="Programmed")].status} {.status.addresses[-1:].value}`)
		}).WithContext(ctx).WithTimeout(3 * time.Minute).WithPolling(2 * time.Second).
			Should(Equal("True default-edge-gateway.devcluster.ts.net"))
		Eventually(func() (string, error) {
			return devcluster("kubectl", "get", "httproute", "edge-web", "-o",
				`jsonpath={.status.parents[0].controllerName} {.status.parents[0].conditions[?(@.type=="Accepted")].status} {.status.parents[0].conditions[?(@.type=="ResolvedRefs")].status}`)
		}).WithContext(ctx).WithTimeout(time.Minute).WithPolling(time.Second).
			Should(Equal("tailplane.dev/gateway-controller True True"))
	}, SpecTimeout(5*time.Minute))

	It("splits by weight over HTTPS and sends X-Canary: always to the canary", func(ctx SpecContext) {
		Eventually(func() (string, error) {
			_, body, _, err := client.get(ctx, site, nil)
			return body, err
		}).WithContext(ctx).WithTimeout(3 * time.Minute).WithPolling(2 * time.Second).Should(ContainSubstring(`"pod":"edge-`))
		const n = 400
		canary := 0
		for range n {
			status, body, _, err := client.get(ctx, site, nil)
			Expect(err).NotTo(HaveOccurred())
			Expect(status).To(Equal(http.StatusOK), body)
			if strings.Contains(body, `"pod":"edge-canary-`) {
				canary++
			}
		}
		AddReportEntry("canary share of 400 requests through the Gateway (weight 10 of 100)", fmt.Sprintf("%.1f%%", 100*float64(canary)/n))
		// 10% of 400 is 40; a binomial's 4.5 standard deviations either side.
		Expect(canary).To(BeNumerically(">=", 13), "canary got %d of %d", canary, n)
		Expect(canary).To(BeNumerically("<=", 67), "canary got %d of %d", canary, n)
		for range 10 {
			_, body, _, err := client.get(ctx, site, http.Header{"X-Canary": {"always"}})
			Expect(err).NotTo(HaveOccurred())
			Expect(body).To(ContainSubstring(`"pod":"edge-canary-`))
		}
		status, body, _, err := client.get(ctx, plain, nil)
		Expect(err).NotTo(HaveOccurred())
		Expect(status).To(Equal(http.StatusOK), "the HTTP listener: %s", body)
	}, SpecTimeout(6*time.Minute))

	It("answers the canary's share with 500 while its Service is gone, and serves it again once re-created", func(ctx SpecContext) {
		out, err := devcluster("kubectl", "delete", "service", "edge-canary")
		Expect(err).NotTo(HaveOccurred(), out)
		Eventually(func() (string, error) {
			return devcluster("kubectl", "get", "httproute", "edge-web", "-o",
				`jsonpath={.status.parents[0].conditions[?(@.type=="ResolvedRefs")].reason}`)
		}).WithContext(ctx).WithTimeout(time.Minute).WithPolling(time.Second).Should(Equal("BackendNotFound"))
		Eventually(func() (int, error) {
			status, _, _, err := client.get(ctx, site, http.Header{"X-Canary": {"always"}})
			return status, err
		}).WithContext(ctx).WithTimeout(time.Minute).WithPolling(time.Second).Should(Equal(http.StatusInternalServerError))
		status, body, _, err := client.get(ctx, site, http.Header{"X-Canary": {"no"}})
		Expect(err).NotTo(HaveOccurred())
		Expect(status).To(BeElementOf(http.StatusOK, http.StatusInternalServerError), body)

		out, err = devcluster("kubectl", "apply", "-f", manifest)
		Expect(err).NotTo(HaveOccurred(), out)
		Eventually(func() (string, error) {
			_, body, _, err := client.get(ctx, site, http.Header{"X-Canary": {"always"}})
			return body, err
		}).WithContext(ctx).WithTimeout(2 * time.Minute).WithPolling(time.Second).Should(ContainSubstring(`"pod":"edge-canary-`))
	}, SpecTimeout(5*time.Minute))

	It("leaves no device behind when deleted", func(ctx SpecContext) {
		api := tailnetAPI()
		Expect(deviceHostnames(ctx, api)).To(ContainElement("default-edge-gateway"))
		out, err := devcluster("kubectl", "delete", "-f", manifest, "--wait")
		Expect(err).NotTo(HaveOccurred(), out)
		Eventually(func() ([]string, error) { return deviceHostnames(ctx, api) }).WithContext(ctx).
			WithTimeout(2 * time.Minute).WithPolling(2 * time.Second).ShouldNot(ContainElement("default-edge-gateway"))
	}, SpecTimeout(4*time.Minute))
})
