package operator

import (
	"fmt"
	"io"
	"net/http"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

// A ProxyClass with metrics.enable gives each of its proxies a metrics
// Service (and, with the Prometheus Operator's CRD installed, a
// ServiceMonitor); turning metrics off removes them.
var _ = Describe("ProxyClass metrics", Ordered, func() {
	const proxyClass = `
apiVersion: tailscale.com/v1alpha1
kind: ProxyClass
metadata:
  name: metrics
spec:
  metrics:
    enable: %t
    serviceMonitor:
      enable: %t
      labels: {release: prometheus}
`
	const service = `
apiVersion: v1
kind: Service
metadata:
  name: metered
  annotations: {tailscale.com/expose: "true"}
  labels: {tailscale.com/proxy-class: metrics}
spec:
  selector: {app: postgres}
  ports: [{port: 5432}]
`
	selector := "-l=tailscale.com/parent-resource=metered,tailscale.com/metrics-target"

	BeforeAll(func() {
		out, err := devcluster("kubectl", "apply", "-f", "kind-e2e/operator/testdata/echo.yaml",
			"-f", "deploy/manifests/testdata/servicemonitor-crd.yaml")
		Expect(err).NotTo(HaveOccurred(), out)
		Expect(kubectlApply(fmt.Sprintf(proxyClass, true, true))).To(Succeed())
		Expect(kubectlApply(service)).To(Succeed())
	})

	It("serves the proxy's metrics through a metrics Service", func() {
		skipIfExternal("fetches the Service's ClusterIP from this machine")
		var clusterIP string
		Eventually(func() (string, error) {
			out, err := devcluster("kubectl", "get", "svc", "-n", "tailscale", selector, "-o", "jsonpath={.items[0].spec.clusterIP}")
			clusterIP = out
			return out, err
		}).WithTimeout(2 * time.Minute).WithPolling(time.Second).ShouldNot(BeEmpty())
		Eventually(func() (string, error) {
			// A bounded wait: a connection begun before kube-proxy routes
			// the new ClusterIP would wait for the kernel's SYN retries.
			resp, err := (&http.Client{Timeout: 5 * time.Second}).Get("http://" + clusterIP + ":9002/metrics")
			if err != nil {
				return "", err
			}
			defer resp.Body.Close()
			b, err := io.ReadAll(resp.Body)
			return string(b), err
		}).WithTimeout(2 * time.Minute).WithPolling(2 * time.Second).Should(ContainSubstring("tailplane_proxy_"))
	})

	It("creates a ServiceMonitor owned by the metrics Service", func() {
		Eventually(func() (string, error) {
			return devcluster("kubectl", "get", "servicemonitors", "-n", "tailscale", selector,
				"-o", "jsonpath={.items[0].metadata.ownerReferences[0].kind} {.items[0].spec.jobLabel} {.items[0].metadata.labels.release}")
		}).WithTimeout(time.Minute).WithPolling(time.Second).Should(Equal("Service ts_prom_job prometheus"))
	})

	It("removes both when the ProxyClass turns metrics off", func() {
		Expect(kubectlApply(fmt.Sprintf(proxyClass, false, false))).To(Succeed())
		Eventually(func() (string, error) {
			return devcluster("kubectl", "get", "svc,servicemonitors", "-n", "tailscale", selector, "-o", "name")
		}).WithTimeout(2 * time.Minute).WithPolling(time.Second).Should(BeEmpty())
	})
})

// kubectlApply applies a manifest given as text.
func kubectlApply(manifest string) error {
	out, err := devclusterStdin(manifest, "kubectl", "apply", "-f", "-")
	if err != nil {
		return &commandError{out: out, err: err}
	}
	return nil
}

type commandError struct {
	out string
	err error
}

func (e *commandError) Error() string { return e.err.Error() + ": " + e.out }
