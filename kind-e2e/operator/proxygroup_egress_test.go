package operator

import (
	"context"
	"io"
	"net/http"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

// An egress ProxyGroup of two replicas: cluster traffic to an ExternalName
// Service reaches a tailnet device by its MagicDNS name through whichever
// replica the Service's EndpointSlice lists, and keeps reaching it while a
// replica's pod is deleted.
var _ = Describe("egress ProxyGroups", Ordered, func() {
	const ns = "pge-e2e"
	var clusterIP string

	BeforeAll(func(ctx SpecContext) {
		target := newTailnetClient(ctx, "e2e-egress-target")
		DeferCleanup(target.close)
		ln, err := target.node.Listen("tcp", ":80")
		Expect(err).NotTo(HaveOccurred())
		srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			_, _ = io.WriteString(w, "tailnet target")
		})}
		go func() { _ = srv.Serve(ln) }()
		DeferCleanup(srv.Close)
		manifest := `apiVersion: tailscale.com/v1alpha1
kind: ProxyGroup
metadata:
  name: egress-proxies
spec:
  type: egress
  replicas: 2
---
apiVersion: v1
kind: Namespace
metadata:
  name: ` + ns + `
---
apiVersion: v1
kind: Service
metadata:
  name: target
  namespace: ` + ns + `
  annotations:
    tailscale.com/proxy-group: egress-proxies
    tailscale.com/tailnet-fqdn: e2e-egress-target.devcluster.ts.net
spec:
  type: ExternalName
  externalName: placeholder
  ports:
    - {name: http, port: 80}
`
		out, err := devclusterStdin(manifest, "kubectl", "apply", "-f", "-")
		Expect(err).NotTo(HaveOccurred(), out)
		DeferCleanup(func() {
			_, _ = devcluster("kubectl", "delete", "--ignore-not-found", "namespace", ns)
			_, _ = devcluster("kubectl", "delete", "--ignore-not-found", "proxygroup", "egress-proxies")
		})
	}, NodeTimeout(2*time.Minute))

	It("routes cluster traffic to the tailnet device through the group", func(ctx SpecContext) {
		Eventually(func() (string, error) {
			return devcluster("kubectl", "get", "svc", "-n", ns, "target", "-o",
				`jsonpath={.status.conditions[?(@.type=="TailscaleEgressSvcReady")].reason} {.spec.externalName}`)
		}).WithContext(ctx).WithTimeout(3 * time.Minute).WithPolling(time.Second).Should(MatchRegexp(`^ReadyToRouteTraffic ts-target-[0-9a-f]{8}\.tailscale\.svc\.cluster\.local$`))
		out, err := devcluster("kubectl", "get", "svc", "-n", ns, "target", "-o", "jsonpath={.spec.externalName}")
		Expect(err).NotTo(HaveOccurred(), out)
		name := strings.Split(out, ".")[0]
		clusterIP, err = devcluster("kubectl", "get", "svc", "-n", "tailscale", name, "-o", "jsonpath={.spec.clusterIP}")
		Expect(err).NotTo(HaveOccurred(), clusterIP)
		Eventually(func() (string, error) { return getHost(ctx, "http://"+clusterIP+"/") }).WithContext(ctx).
			WithTimeout(2 * time.Minute).WithPolling(2 * time.Second).Should(Equal("tailnet target"))
	}, SpecTimeout(5*time.Minute))

	It("keeps routing while a replica's pod is deleted", func(ctx SpecContext) {
		out, err := devcluster("kubectl", "get", "pod", "-n", "tailscale", "-l", "tailscale.com/parent-resource=egress-proxies",
			"-o", "jsonpath={.items[*].metadata.name}")
		Expect(err).NotTo(HaveOccurred(), out)
		pods := strings.Fields(out)
		Expect(pods).To(HaveLen(2))
		out, err = devcluster("kubectl", "delete", "pod", "-n", "tailscale", pods[0], "--wait=false")
		Expect(err).NotTo(HaveOccurred(), out)
		Eventually(func() (string, error) {
			return devcluster("kubectl", "get", "svc", "-n", ns, "target", "-o",
				`jsonpath={.status.conditions[?(@.type=="TailscaleEgressSvcReady")].reason}`)
		}).WithContext(ctx).WithTimeout(time.Minute).WithPolling(200 * time.Millisecond).Should(Equal("PartiallyReadyToRouteTraffic"))
		Consistently(func() (string, error) { return getHost(ctx, "http://"+clusterIP+"/") }).WithContext(ctx).
			WithTimeout(5 * time.Second).WithPolling(500 * time.Millisecond).Should(Equal("tailnet target"))
		Eventually(func() (string, error) {
			return devcluster("kubectl", "get", "svc", "-n", ns, "target", "-o",
				`jsonpath={.status.conditions[?(@.type=="TailscaleEgressSvcReady")].reason}`)
		}).WithContext(ctx).WithTimeout(2 * time.Minute).WithPolling(time.Second).Should(Equal("ReadyToRouteTraffic"))
	}, SpecTimeout(4*time.Minute))
})

// getHost GETs a URL from this machine's network (where devcluster's
// Services are), as a pod does.
func getHost(ctx context.Context, url string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}
