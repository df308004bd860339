package operator

import (
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

// Pods come and go; tailnet devices stay: a proxy's state (its node key) is
// in its state Secret, the operator's in Secret tailscale/operator. On the
// real node these are real containers killed and started again by the
// kubelet; on the process node, host processes.
var _ = Describe("pods deleted", Ordered, func() {
	const selector = "tailscale.com/parent-resource=postgres-lb,tailscale.com/parent-resource-ns=default"

	BeforeAll(func() {
		out, err := devcluster("kubectl", "apply", "-f", "kind-e2e/operator/testdata/echo.yaml", "-f", "examples/seed/02-service-loadbalancer.yaml")
		Expect(err).NotTo(HaveOccurred(), out)
	})

	It("puts the seed's LoadBalancer Service on the tailnet", func() {
		Eventually(func() (string, error) {
			return devcluster("kubectl", "get", "svc", "postgres-lb", "-o", "jsonpath={.status.loadBalancer.ingress[*].hostname}")
		}).WithTimeout(2 * time.Minute).WithPolling(time.Second).Should(Equal("default-postgres-lb.devcluster.ts.net"))
		Eventually(func() (string, error) {
			return devcluster("curl", "http://default-postgres-lb.devcluster.ts.net:5432/")
		}).WithTimeout(2 * time.Minute).WithPolling(2 * time.Second).Should(ContainSubstring(`"pod":"postgres-`))
	})

	It("a proxy pod deleted comes back as the same device", func(ctx SpecContext) {
		api := tailnetAPI()
		before := deviceNamed(ctx, api, "default-postgres-lb")
		pod, err := devcluster("kubectl", "-n", "tailscale", "get", "pods", "-l", selector, "-o", "jsonpath={.items[0].metadata.name} {.items[0].metadata.uid}")
		Expect(err).NotTo(HaveOccurred(), pod)
		name, uid, _ := strings.Cut(pod, " ")
		out, err := devcluster("kubectl", "-n", "tailscale", "delete", "pod", name, "--wait=false")
		Expect(err).NotTo(HaveOccurred(), out)
		Eventually(func() (string, error) {
			return devcluster("kubectl", "-n", "tailscale", "get", "pods", "-l", selector, "-o",
				`jsonpath={range .items[?(@.metadata.uid!="`+uid+`")]}{.status.containerStatuses[0].ready}{end}`)
		}).WithContext(ctx).WithTimeout(2 * time.Minute).WithPolling(time.Second).Should(Equal("true"))
		Eventually(func() (string, error) {
			return devcluster("curl", "http://default-postgres-lb.devcluster.ts.net:5432/")
		}).WithContext(ctx).WithTimeout(2 * time.Minute).WithPolling(2 * time.Second).Should(ContainSubstring(`"pod":"postgres-`))
		after := deviceNamed(ctx, api, "default-postgres-lb")
		Expect(after.ID).To(Equal(before.ID), "the device after the pod came back")
		Expect(after.Addresses).To(Equal(before.Addresses))
		names, err := deviceHostnames(ctx, api)
		Expect(err).NotTo(HaveOccurred())
		Expect(names).To(HaveEach(Not(HavePrefix("default-postgres-lb-"))), "a second device for the proxy")
	}, SpecTimeout(5*time.Minute))

	It("the operator pod deleted comes back as the same device and keeps serving", func(ctx SpecContext) {
		api := tailnetAPI()
		before := deviceNamed(ctx, api, "tailscale-operator")
		out, err := devcluster("kubectl", "-n", "tailscale", "delete", "pod", "-l", "app.kubernetes.io/name=tailplane-operator")
		Expect(err).NotTo(HaveOccurred(), out)
		Eventually(func() (string, error) {
			return devcluster("kubectl", "-n", "tailscale", "get", "deployment", "operator", "-o", "jsonpath={.status.readyReplicas}")
		}).WithContext(ctx).WithTimeout(2 * time.Minute).WithPolling(time.Second).Should(Equal("1"))
		Expect(deviceNamed(ctx, api, "tailscale-operator").ID).To(Equal(before.ID))
		By("the new operator reconciles: a change to the Service reaches its proxy")
		out, err = devcluster("kubectl", "annotate", "svc", "postgres-lb", "--overwrite", "tailscale.com/hostname=postgres-lb-renamed")
		Expect(err).NotTo(HaveOccurred(), out)
		Eventually(func() (string, error) {
			return devcluster("curl", "http://postgres-lb-renamed.devcluster.ts.net:5432/")
		}).WithContext(ctx).WithTimeout(2 * time.Minute).WithPolling(2 * time.Second).Should(ContainSubstring(`"pod":"postgres-`))
		out, err = devcluster("kubectl", "annotate", "svc", "postgres-lb", "tailscale.com/hostname-")
		Expect(err).NotTo(HaveOccurred(), out)
		Eventually(func() (string, error) {
			return devcluster("curl", "http://default-postgres-lb.devcluster.ts.net:5432/")
		}).WithContext(ctx).WithTimeout(2 * time.Minute).WithPolling(2 * time.Second).Should(ContainSubstring(`"pod":"postgres-`))
	}, SpecTimeout(6*time.Minute))

	It("the Service deleted leaves no device, Secret or finalizer", func(ctx SpecContext) {
		api := tailnetAPI()
		id := deviceNamed(ctx, api, "default-postgres-lb").ID
		out, err := devcluster("kubectl", "delete", "svc", "postgres-lb", "--timeout=2m")
		Expect(err).NotTo(HaveOccurred(), out)
		Eventually(func(g Gomega) {
			devices, err := api.Devices().List(ctx)
			g.Expect(err).NotTo(HaveOccurred())
			for _, d := range devices {
				g.Expect(d.ID).NotTo(Equal(id), "device %s still on the tailnet", d.Name)
			}
		}).WithContext(ctx).WithTimeout(2 * time.Minute).WithPolling(time.Second).Should(Succeed())
		Eventually(func() (string, error) {
			return devcluster("kubectl", "-n", "tailscale", "get", "secrets,statefulsets,pods", "-l", selector, "-o", "name")
		}).WithContext(ctx).WithTimeout(2 * time.Minute).WithPolling(time.Second).Should(BeEmpty())
	}, SpecTimeout(5*time.Minute))
})
