package operator

import (
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

// The seed guide's least-privilege grant, with group:dev holding the
// devcluster user that devcluster curl joins as: through the proxies the
// operator made for the seed's examples, the Ingress (tag:k8s, 443) is
// reached and the exposed database (5432) is not, until the policy adds
// tcp:5432. The tailnet's policy comes back after.
var _ = Describe("the tailnet policy's packet filters", Ordered, func() {
	const grant = `{
		"groups": {"group:dev": ["devcluster@devcluster.ts.net"]},
		"tagOwners": {
			"tag:k8s-operator": ["autogroup:admin"],
			"tag:k8s": ["tag:k8s-operator"]
		},
		"autoApprovers": {"services": {"tag:k8s": ["tag:k8s"]}},
		"grants": [{"src": ["group:dev"], "dst": ["tag:k8s"], "ip": ["tcp:443"]}]
	}`
	BeforeAll(func(ctx SpecContext) {
		out, err := devcluster("kubectl", "apply", "-f", "kind-e2e/operator/testdata/echo.yaml",
			"-f", "examples/seed/01-service-expose.yaml", "-f", "examples/seed/03-ingress.yaml")
		Expect(err).NotTo(HaveOccurred(), out)
		Eventually(func() (string, error) {
			return devcluster("curl", "http://default-postgres.devcluster.ts.net:5432/")
		}).WithTimeout(3 * time.Minute).WithPolling(2 * time.Second).Should(ContainSubstring(`"pod":"postgres-`))
		api := tailnetAPI()
		before, err := api.PolicyFile().Raw(ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(api.PolicyFile().Set(ctx, grant, "")).To(Succeed())
		DeferCleanup(func(ctx SpecContext) {
			Expect(tailnetAPI().PolicyFile().Set(ctx, before.HuJSON, "")).To(Succeed())
		})
	})

	It("lets group:dev reach the Ingress on 443 and drops the database's 5432 at the proxy", func() {
		Eventually(func() (string, error) {
			return devcluster("curl", "https://my-app.devcluster.ts.net/")
		}).WithTimeout(3 * time.Minute).WithPolling(2 * time.Second).Should(ContainSubstring(`"pod":"my-app-`))
		out, err := devcluster("curl", "--timeout", "5s", "http://default-postgres.devcluster.ts.net:5432/")
		Expect(err).To(HaveOccurred(), "5432 is not in the grant, yet: %s", out)
	})

	It("reaches the database once the policy adds tcp:5432", func(ctx SpecContext) {
		Expect(tailnetAPI().PolicyFile().Set(ctx, strings.Replace(grant, `"tcp:443"`, `"tcp:443", "tcp:5432"`, 1), "")).To(Succeed())
		Eventually(func() (string, error) {
			return devcluster("curl", "--timeout", "5s", "http://default-postgres.devcluster.ts.net:5432/")
		}).WithTimeout(time.Minute).WithPolling(time.Second).Should(ContainSubstring(`"pod":"postgres-`))
	})
})
