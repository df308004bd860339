package operator

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"tailscale.com/tailcfg"
)

// ProxyClass staticEndpoints on the real node, whose ExternalIP devcluster
// sets as a cloud provider would: each replica of a ProxyGroup gets a
// NodePort Service to its WireGuard port, advertises "<ExternalIP>:<node
// port>" to the tailnet, and a tailnet peer's disco pings to that endpoint
// come back through kube-proxy's NodePort rules from the replica itself.
var _ = Describe("ProxyClass staticEndpoints", Ordered, Label(realNodeOnly), func() {
	const (
		class      = "static-endpoints"
		group      = "static-proxies"
		externalIP = "198.19.1.1" // realnode.ExternalIP
	)
	var endpoints []string // replica ordinal -> its static endpoint

	BeforeAll(func(ctx SpecContext) {
		manifest := `apiVersion: tailscale.com/v1alpha1
kind: ProxyClass
metadata:
  name: ` + class + `
spec: {}
---
apiVersion: tailscale.com/v1alpha1
kind: ProxyGroup
metadata:
  name: ` + group + `
spec:
  type: egress
  replicas: 2
  proxyClass: ` + class + `
`
		out, err := devclusterStdin(manifest, "kubectl", "apply", "-f", "-")
		Expect(err).NotTo(HaveOccurred(), out)
		DeferCleanup(func() {
			_, _ = devcluster("kubectl", "delete", "--ignore-not-found", "proxygroup", group)
			_, _ = devcluster("kubectl", "delete", "--ignore-not-found", "proxyclass", class)
		})
	}, NodeTimeout(time.Minute))

	It("advertises each replica's NodePort on the node's ExternalIP once its ProxyClass asks", func(ctx SpecContext) {
		Eventually(func() (string, error) {
			return devcluster("kubectl", "get", "proxygroup", group, "-o", `jsonpath={.status.conditions[?(@.type=="ProxyGroupReady")].reason}`)
		}).WithContext(ctx).WithTimeout(3 * time.Minute).WithPolling(time.Second).Should(Equal("ProxyGroupReady"))
		// Turned on for a running group: its replicas restart on their new
		// WireGuard port.
		out, err := devcluster("kubectl", "patch", "proxyclass", class, "--type=merge", "-p",
			`{"spec":{"staticEndpoints":{"nodePort":{"ports":[{"port":30850,"endPort":30851}]}}}}`)
		Expect(err).NotTo(HaveOccurred(), out)
		Eventually(func() (string, error) {
			return devcluster("kubectl", "get", "proxygroup", group, "-o", `jsonpath={range .status.devices[*]}{.hostname}={.staticEndpoints[*]} {end}`)
		}).WithContext(ctx).WithTimeout(2 * time.Minute).WithPolling(time.Second).Should(
			Equal(fmt.Sprintf("%[1]s-0=%[2]s:30850 %[1]s-1=%[2]s:30851 ", group, externalIP)))
		endpoints = []string{externalIP + ":30850", externalIP + ":30851"}
		// Each Service forwards its node port to its own replica's Pod.
		out, err = devcluster("kubectl", "get", "svc", "-n", "tailscale", "-l", "tailscale.com/parent-resource="+group, "-o",
			`jsonpath={range .items[?(@.spec.type=="NodePort")]}{.spec.ports[0].protocol} {.spec.ports[0].nodePort} {.spec.ports[0].targetPort} {.spec.selector.statefulset\.kubernetes\.io/pod-name}{"\n"}{end}`)
		Expect(err).NotTo(HaveOccurred(), out)
		lines := strings.Split(strings.TrimSpace(out), "\n")
		Expect(lines).To(HaveLen(2), out)
		for i, l := range lines {
			Expect(l).To(MatchRegexp(`^UDP 3085%d \d+ ts-%s-[0-9a-f]{8}-%d$`, i, group, i))
		}
	}, SpecTimeout(5*time.Minute))

	It("answers a tailnet peer's disco pings at the static endpoints", func(ctx SpecContext) {
		c := newTailnetClient(ctx, "e2e-static-peer")
		DeferCleanup(c.close)
		lc, err := c.node.LocalClient()
		Expect(err).NotTo(HaveOccurred())
		// The "got pong" lines name the address each pong came from.
		Expect(lc.SetComponentDebugLogging(ctx, "magicsock", 5*time.Minute)).To(Succeed())
		start := time.Now()
		for i, ep := range endpoints {
			host := fmt.Sprintf("%s-%d", group, i)
			var ip netip.Addr
			Eventually(func() error {
				st, err := lc.Status(ctx)
				if err != nil {
					return err
				}
				for _, p := range st.Peer {
					if strings.HasPrefix(p.DNSName, host+".") && len(p.TailscaleIPs) > 0 {
						ip = p.TailscaleIPs[0]
						return nil
					}
				}
				return fmt.Errorf("no peer %s", host)
			}).WithContext(ctx).WithTimeout(time.Minute).WithPolling(time.Second).Should(Succeed())
			// The client learns the endpoint from control only (the
			// replica cannot see its node's ExternalIP), and pings it
			// with the others.
			// A ping waits for its pong until its context ends, as the
			// CLI's does, so each gets its own five seconds: one sent while
			// the replica restarts on its new port would otherwise hold
			// the spec until its timeout.
			Eventually(func() ([]string, error) {
				pingCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
				defer cancel()
				if _, err := lc.Ping(pingCtx, ip, tailcfg.PingDisco); err != nil {
					return nil, err
				}
				return slices.DeleteFunc(c.log.since(start), func(l string) bool { return !strings.Contains(l, ", "+ep+")  got pong") }), nil
			}).WithContext(ctx).WithTimeout(2*time.Minute).WithPolling(2*time.Second).ShouldNot(BeEmpty(), "a pong from "+ep)
		}
	}, SpecTimeout(5*time.Minute))

	It("deletes a replica's Service when the group scales down, and all with the group", func(ctx SpecContext) {
		nodePorts := func() (string, error) {
			return devcluster("kubectl", "get", "svc", "-n", "tailscale", "-l", "tailscale.com/parent-resource="+group, "-o",
				`jsonpath={range .items[?(@.spec.type=="NodePort")]}{.spec.ports[0].nodePort} {end}`)
		}
		out, err := devcluster("kubectl", "patch", "proxygroup", group, "--type=merge", "-p", `{"spec":{"replicas":1}}`)
		Expect(err).NotTo(HaveOccurred(), out)
		Eventually(nodePorts).WithContext(ctx).WithTimeout(time.Minute).WithPolling(time.Second).Should(Equal("30850 "))
		out, err = devcluster("kubectl", "delete", "proxygroup", group)
		Expect(err).NotTo(HaveOccurred(), out)
		Eventually(nodePorts).WithContext(ctx).WithTimeout(time.Minute).WithPolling(time.Second).Should(BeEmpty())
	}, SpecTimeout(3*time.Minute))
})
