package operator

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"golang.org/x/net/dns/dnsmessage"
	tsapi "tailscale.com/client/tailscale/v2"
	"tailscale.com/ipn"
	"tailscale.com/net/tsaddr"
	"tailscale.com/tailcfg"
	"tailscale.com/tsnet"
	"tailscale.com/wgengine/netstack"
)

// The seed's three Connectors, applied verbatim, with real traffic from
// tailnet clients of the test: a subnet router of devcluster's pod subnet
// (reachable only once its route is approved through the API), the seed's
// two-replica exit node (approved by the policy's autoApprovers, used by a
// client that selects it, scaled down to one device), and the app connector
// (its routes come from the policy's nodeAttrs, as on Tailscale, or from
// the DNS answers it gives a client for an app's domain).
var _ = Describe("Connectors", Ordered, func() {
	var (
		api                  *tsapi.Client
		routesClient, exitTo *tailnetClient // with accepted routes; for the exit node
		outside              netip.AddrPort // an HTTP server on this machine, not on the tailnet
	)

	BeforeAll(func(ctx SpecContext) {
		api = tailnetAPI()
		outside = outsideServer()
		staticAppRoute = staticRouteAvoiding(outside.Addr())
		// This container's policy: exit nodes of tag:k8s and the app
		// connector's routes are approved automatically, other routes
		// wait for an admin; the app connector gets its apps from the
		// policy's nodeAttrs: one with a configured route, one whose
		// route it learns from DNS answers. The tailnet's own policy comes
		// back after.
		before, err := api.PolicyFile().Raw(ctx)
		Expect(err).NotTo(HaveOccurred())
		policy := fmt.Sprintf(`{
			"autoApprovers": {"routes": {%q: ["tag:k8s"], %q: ["tag:k8s"]}, "exitNode": ["tag:k8s"]},
			"nodeAttrs": [{"target": ["*"], "app": {"tailscale.com/app-connectors": [
				{"name": "static", "connectors": ["tag:k8s"], "domains": ["static.e2e.test"], "routes": [%q]},
				{"name": "outside", "connectors": ["tag:k8s"], "domains": [%q]},
			]}}],
		}`, staticAppRoute, netip.PrefixFrom(outside.Addr(), 32), staticAppRoute, outsideDomain)
		Expect(api.PolicyFile().Set(ctx, policy, "")).To(Succeed())
		DeferCleanup(func(ctx SpecContext) {
			_, _ = devcluster("kubectl", "delete", "--ignore-not-found", "--wait=false", "connector", "ts-pod-cidrs", "pod-subnet", "exit-node", "app-connector")
			_, _ = devcluster("kubectl", "delete", "--ignore-not-found", "-f", "kind-e2e/operator/testdata/connector-echo.yaml")
			Expect(api.PolicyFile().Set(ctx, before.HuJSON, "")).To(Succeed())
		})
		out, err := devcluster("kubectl", "apply", "-f", "kind-e2e/operator/testdata/connector-echo.yaml")
		Expect(err).NotTo(HaveOccurred(), out)
		routesClient = newTailnetClient(ctx, "e2e-routes")
		DeferCleanup(routesClient.close)
		editPrefs(ctx, routesClient.node, &ipn.MaskedPrefs{Prefs: ipn.Prefs{RouteAll: true}, RouteAllSet: true})
		exitTo = newTailnetClient(ctx, "e2e-exit")
		DeferCleanup(exitTo.close)
	}, NodeTimeout(2*time.Minute))

	It("refuses invalid Connectors through kubectl apply with the official messages", func() {
		for _, tc := range []struct{ spec, want string }{
			{"hostname: one\n  replicas: 2\n  exitNode: true", "The hostname field cannot be specified when replicas is greater than 1."},
			{"hostname: one\n  hostnamePrefix: two\n  exitNode: true", "The hostname and hostnamePrefix fields are mutually exclusive."},
			{"exitNode: true\n  appConnector: {}", "The appConnector field is mutually exclusive with exitNode and subnetRouter fields."},
		} {
			out, err := devclusterStdin("apiVersion: tailscale.com/v1alpha1\nkind: Connector\nmetadata:\n  name: refused\nspec:\n  "+tc.spec+"\n",
				"kubectl", "apply", "-f", "-")
			Expect(err).To(HaveOccurred(), "kubectl apply of spec %q: %s", tc.spec, out)
			Expect(out).To(ContainSubstring(tc.want), "spec %q", tc.spec)
		}
	})

	It("runs the seed's subnet router: Ready, advertising 10.42.0.0/16, unapproved without an auto-approver", func(ctx SpecContext) {
		applySeed("04-connector-subnet-router.yaml")
		devices := waitConnectorReady(ctx, "ts-pod-cidrs", 1)
		Expect(devices).To(ConsistOf(HavePrefix("ts-pod-cidrs-0.")))
		out, err := devcluster("kubectl", "get", "connector", "ts-pod-cidrs", "-o", "jsonpath={.status.subnetRoutes}")
		Expect(err).NotTo(HaveOccurred(), out)
		Expect(out).To(Equal("10.42.0.0/16"))
		// kubectl get -o wide adds the device's name and addresses to the
		// official columns.
		out, err = devcluster("kubectl", "get", "connector", "ts-pod-cidrs", "-o", "wide")
		Expect(err).NotTo(HaveOccurred(), out)
		Expect(out).To(And(
			MatchRegexp(`(?m)^NAME\s+SUBNETROUTES\s+ISEXITNODE\s+ISAPPCONNECTOR\s+STATUS\s+HOSTNAME\s+TAILNETIPS\s+AGE$`),
			MatchRegexp(`(?m)^ts-pod-cidrs\s+10\.42\.0\.0/16\s+false\s+false\s+ConnectorCreated\s+ts-pod-cidrs-0\.devcluster\.ts\.net\s+\["100\.\S+\s+\d+[smhd]`)))
		id := deviceID(ctx, api, "ts-pod-cidrs-0")
		Eventually(func(g Gomega) {
			r, err := api.Devices().SubnetRoutes(ctx, id)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(r.Advertised).To(ConsistOf("10.42.0.0/16"))
			g.Expect(r.Enabled).To(BeEmpty())
		}).WithContext(ctx).WithTimeout(time.Minute).WithPolling(time.Second).Should(Succeed())
	}, SpecTimeout(3*time.Minute))

	It("routes a tailnet client to a pod IP of devcluster's pod subnet once the route is approved", func(ctx SpecContext) {
		podIP := waitPodIP(ctx, "app=conn-echo")
		subnet := netip.PrefixFrom(podIP, 24).Masked()
		out, err := devclusterStdin(fmt.Sprintf(`apiVersion: tailscale.com/v1alpha1
kind: Connector
metadata:
  name: pod-subnet
spec:
  subnetRouter:
    advertiseRoutes: [%q]
`, subnet), "kubectl", "apply", "-f", "-")
		Expect(err).NotTo(HaveOccurred(), out)
		waitConnectorReady(ctx, "pod-subnet", 1)
		id := deviceID(ctx, api, "pod-subnet-connector")
		Eventually(func() ([]string, error) {
			r, err := api.Devices().SubnetRoutes(ctx, id)
			if err != nil {
				return nil, err
			}
			return r.Advertised, nil
		}).WithContext(ctx).WithTimeout(time.Minute).WithPolling(time.Second).Should(ConsistOf(subnet.String()))
		pod := netip.AddrPortFrom(podIP, 8080)
		_, err = routesClient.getVia(ctx, pod, 3*time.Second)
		Expect(err).To(HaveOccurred(), "the pod answered through an unapproved route")

		Expect(api.Devices().SetSubnetRoutes(ctx, id, []string{subnet.String()})).To(Succeed())
		Eventually(func() (string, error) {
			return routesClient.getVia(ctx, pod, 5*time.Second)
		}).WithContext(ctx).WithTimeout(time.Minute).WithPolling(time.Second).Should(ContainSubstring(`"pod":"conn-echo-`))
	}, SpecTimeout(3*time.Minute))

	// Issue 14's last subnet-router test. The process node's ClusterIPs are
	// loopback addresses (127.96.0.0/16), which a connector's userspace
	// stack never forwards; the real node's are routed by kube-proxy.
	It("routes a tailnet client to a Service's ClusterIP through the Connector once the route is approved", Label(realNodeOnly), func(ctx SpecContext) {
		out, err := devclusterStdin("apiVersion: v1\nkind: Service\nmetadata: {name: conn-echo}\nspec:\n  selector: {app: conn-echo}\n  ports: [{port: 80, targetPort: 8080}]\n",
			"kubectl", "apply", "-f", "-")
		Expect(err).NotTo(HaveOccurred(), out)
		DeferCleanup(func() {
			_, _ = devcluster("kubectl", "delete", "--ignore-not-found", "--wait=false", "service", "conn-echo")
		})
		ip, err := devcluster("kubectl", "get", "service", "conn-echo", "-o", "jsonpath={.spec.clusterIP}")
		Expect(err).NotTo(HaveOccurred(), ip)
		route := netip.PrefixFrom(netip.MustParseAddr(ip), 32)
		out, err = devclusterStdin(fmt.Sprintf(`apiVersion: tailscale.com/v1alpha1
kind: Connector
metadata:
  name: service-ip
spec:
  subnetRouter:
    advertiseRoutes: [%q]
`, route), "kubectl", "apply", "-f", "-")
		Expect(err).NotTo(HaveOccurred(), out)
		DeferCleanup(func() {
			_, _ = devcluster("kubectl", "delete", "--ignore-not-found", "--wait=false", "connector", "service-ip")
		})
		waitConnectorReady(ctx, "service-ip", 1)
		id := deviceID(ctx, api, "service-ip-connector")
		Eventually(func() ([]string, error) {
			r, err := api.Devices().SubnetRoutes(ctx, id)
			if err != nil {
				return nil, err
			}
			return r.Advertised, nil
		}).WithContext(ctx).WithTimeout(time.Minute).WithPolling(time.Second).Should(ConsistOf(route.String()))
		Expect(api.Devices().SetSubnetRoutes(ctx, id, []string{route.String()})).To(Succeed())
		svc := netip.AddrPortFrom(route.Addr(), 80)
		Eventually(func() (string, error) {
			return routesClient.getVia(ctx, svc, 5*time.Second)
		}).WithContext(ctx).WithTimeout(time.Minute).WithPolling(time.Second).Should(ContainSubstring(`"pod":"conn-echo-`))
	}, SpecTimeout(3*time.Minute))

	It("runs the seed's exit node: two devices <prefix>-0 and -1; a client using one reaches outside the tailnet; scaling to 1 deletes a device", func(ctx SpecContext) {
		applySeed("05-connector-exit-node.yaml")
		devices := waitConnectorReady(ctx, "exit-node", 2)
		Expect(devices).To(ConsistOf(HavePrefix("exit-node-0."), HavePrefix("exit-node-1.")))
		exit0 := deviceNamed(ctx, api, "exit-node-0")
		Expect(deviceNamed(ctx, api, "exit-node-1").Tags).To(ConsistOf("tag:k8s"))
		Eventually(func() ([]string, error) {
			r, err := api.Devices().SubnetRoutes(ctx, exit0.ID)
			if err != nil {
				return nil, err
			}
			return r.Enabled, nil
		}).WithContext(ctx).WithTimeout(time.Minute).WithPolling(time.Second).Should(ConsistOf("0.0.0.0/0", "::/0"),
			"the exit routes, approved by autoApprovers.exitNode")

		_, err := exitTo.getVia(ctx, outside, 3*time.Second)
		Expect(err).To(HaveOccurred(), "reached %s without an exit node", outside)
		editPrefs(ctx, exitTo.node, &ipn.MaskedPrefs{Prefs: ipn.Prefs{ExitNodeID: tailcfg.StableNodeID(exit0.NodeID)}, ExitNodeIDSet: true})
		Eventually(func() (string, error) {
			return exitTo.getVia(ctx, outside, 5*time.Second)
		}).WithContext(ctx).WithTimeout(time.Minute).WithPolling(time.Second).Should(Equal("outside"))

		out, err := devcluster("kubectl", "patch", "connector", "exit-node", "--type", "merge", "-p", `{"spec":{"replicas":1}}`)
		Expect(err).NotTo(HaveOccurred(), out)
		Eventually(func() ([]string, error) { return deviceHostnames(ctx, api) }).
			WithContext(ctx).WithTimeout(time.Minute).WithPolling(time.Second).Should(And(ContainElement("exit-node-0"), Not(ContainElement("exit-node-1"))))
		Expect(waitConnectorReady(ctx, "exit-node", 1)).To(ConsistOf(HavePrefix("exit-node-0.")))
		Expect(exitTo.getVia(ctx, outside, 5*time.Second)).To(Equal("outside"), "through exit-node-0 after the scale-down")
	}, SpecTimeout(4*time.Minute))

	It("runs the seed's app connector: the routes of the policy's app are advertised and approved", func(ctx SpecContext) {
		applySeed("06-connector-app-connector.yaml")
		waitConnectorReady(ctx, "app-connector", 1)
		out, err := devcluster("kubectl", "get", "connector", "app-connector", "-o", "jsonpath={.status.isAppConnector}")
		Expect(err).NotTo(HaveOccurred(), out)
		Expect(out).To(Equal("true"))
		id := deviceID(ctx, api, "app-connector-connector")
		Eventually(func(g Gomega) {
			r, err := api.Devices().SubnetRoutes(ctx, id)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(r.Advertised).To(ContainElement(staticAppRoute), "the route of the policy's tailscale.com/app-connectors")
			g.Expect(r.Enabled).To(ContainElement(staticAppRoute))
		}).WithContext(ctx).WithTimeout(time.Minute).WithPolling(time.Second).Should(Succeed())
	}, SpecTimeout(3*time.Minute))

	// The app "outside" has a domain and no routes: the connector learns
	// its address from the answer to a client's query, which the client's
	// MagicDNS sends to the connector's peer API (split DNS from
	// devcluster's control) and the connector resolves with its pod's
	// resolv.conf, i.e. devcluster's cluster DNS, whose records file
	// (D/dns-records) holds the name.
	It("learns an app's route from a client's DNS query: advertised, auto-approved, reached through the connector", func(ctx SpecContext) {
		route := netip.PrefixFrom(outside.Addr(), 32)
		dev := deviceNamed(ctx, api, "app-connector-connector")
		r, err := api.Devices().SubnetRoutes(ctx, dev.ID)
		Expect(err).NotTo(HaveOccurred())
		Expect(r.Advertised).NotTo(ContainElement(route.String()), "advertised before any query")
		_, err = routesClient.getVia(ctx, outside, 3*time.Second)
		Expect(err).To(HaveOccurred(), "reached %s before it was resolved through the connector", outside)

		records := filepath.Join(suite.dir, "cluster", "dns-records")
		Expect(os.WriteFile(records, fmt.Appendf(nil, "%s %s\n", outside.Addr(), outsideDomain), 0o644)).To(Succeed())
		DeferCleanup(func() { _ = os.Remove(records) })
		lc, err := routesClient.node.LocalClient()
		Expect(err).NotTo(HaveOccurred())
		Eventually(func(g Gomega) {
			res, resolvers, err := lc.QueryDNS(ctx, outsideDomain, "A")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(resolvers).NotTo(BeEmpty(), "no resolver for %s (no split-DNS route to the connector)", outsideDomain)
			g.Expect(resolvers[0].Addr).To(And(HavePrefix("http://"+dev.Addresses[0]+":"), HaveSuffix("/dns-query")), "the connector's peer API")
			g.Expect(dnsAnswer(res)).To(ContainElement(outside.Addr()))
		}).WithContext(ctx).WithTimeout(time.Minute).WithPolling(time.Second).Should(Succeed())

		Eventually(func(g Gomega) {
			r, err := api.Devices().SubnetRoutes(ctx, dev.ID)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(r.Advertised).To(ContainElement(route.String()), "the learned route")
			g.Expect(r.Enabled).To(ContainElement(route.String()), "approved by autoApprovers")
		}).WithContext(ctx).WithTimeout(time.Minute).WithPolling(time.Second).Should(Succeed())
		Eventually(func(g Gomega) {
			st, err := lc.Status(ctx)
			g.Expect(err).NotTo(HaveOccurred())
			var routes []netip.Prefix
			for _, p := range st.Peer {
				if p.HostName == "app-connector-connector" && p.PrimaryRoutes != nil {
					routes = p.PrimaryRoutes.AsSlice()
				}
			}
			g.Expect(routes).To(ContainElement(route), "the client's netmap routes it through the connector")
		}).WithContext(ctx).WithTimeout(time.Minute).WithPolling(time.Second).Should(Succeed())
		Eventually(func() (string, error) {
			return routesClient.getVia(ctx, outside, 5*time.Second)
		}).WithContext(ctx).WithTimeout(time.Minute).WithPolling(time.Second).Should(Equal("outside"))
	}, SpecTimeout(3*time.Minute))
})

// The app connector's apps in the container's policy: one with a configured
// route (staticAppRoute, a documentation prefix without the outside server's
// address: nothing is reached there) and one whose route comes from DNS.
var staticAppRoute string

const outsideDomain = "outside.e2e.test"

// staticRouteAvoiding is a documentation /24 that does not hold addr (this
// machine's own address may be in one).
func staticRouteAvoiding(addr netip.Addr) string {
	for _, p := range []string{"198.51.100.0/24", "203.0.113.0/24"} {
		if !netip.MustParsePrefix(p).Contains(addr) {
			return p
		}
	}
	panic("unreachable")
}

// dnsAnswer is the A records of a DNS message.
func dnsAnswer(res []byte) []netip.Addr {
	var p dnsmessage.Parser
	if _, err := p.Start(res); err != nil {
		return nil
	}
	_ = p.SkipAllQuestions()
	var out []netip.Addr
	for {
		h, err := p.AnswerHeader()
		if err != nil {
			return out
		}
		if h.Type != dnsmessage.TypeA {
			_ = p.SkipAnswer()
			continue
		}
		a, err := p.AResource()
		if err != nil {
			return out
		}
		out = append(out, netip.AddrFrom4(a.A))
	}
}

// applySeed applies one of examples/seed/ unchanged.
func applySeed(name string) {
	GinkgoHelper()
	out, err := devcluster("kubectl", "apply", "-f", "examples/seed/"+name)
	Expect(err).NotTo(HaveOccurred(), out)
}

// waitConnectorReady waits for ConnectorReady True with n devices and
// returns their MagicDNS names.
func waitConnectorReady(ctx context.Context, name string, n int) []string {
	GinkgoHelper()
	var names []string
	Eventually(func(g Gomega) {
		out, err := devcluster("kubectl", "get", "connector", name, "-o",
			`jsonpath={.status.conditions[?(@.type=="ConnectorReady")].status} {.status.devices[*].hostname}`)
		g.Expect(err).NotTo(HaveOccurred(), out)
		f := strings.Fields(out)
		g.Expect(f).NotTo(BeEmpty())
		g.Expect(f[0]).To(Equal("True"), "ConnectorReady of %s: %s", name, out)
		names = f[1:]
		g.Expect(names).To(HaveLen(n), "devices of %s", name)
	}).WithContext(ctx).WithTimeout(2 * time.Minute).WithPolling(time.Second).Should(Succeed())
	return names
}

// waitPodIP returns the IP of the running pod with this label.
func waitPodIP(ctx context.Context, selector string) netip.Addr {
	GinkgoHelper()
	var ip netip.Addr
	Eventually(func(g Gomega) {
		out, err := devcluster("kubectl", "get", "pod", "-l", selector, "-o", `jsonpath={.items[?(@.status.phase=="Running")].status.podIP}`)
		g.Expect(err).NotTo(HaveOccurred(), out)
		ip, err = netip.ParseAddr(strings.Fields(out + " x")[0])
		g.Expect(err).NotTo(HaveOccurred(), "pod IP of %s", selector)
	}).WithContext(ctx).WithTimeout(time.Minute).WithPolling(time.Second).Should(Succeed())
	return ip
}

// tailnetAPI is devcluster's Tailscale API with the OAuth client of
// tailnet.env.
func tailnetAPI() *tsapi.Client {
	GinkgoHelper()
	vars := tailnetEnv()
	base, err := url.Parse(vars["TS_API_URL"])
	Expect(err).NotTo(HaveOccurred())
	return &tsapi.Client{BaseURL: base, Tailnet: "-", Auth: &tsapi.OAuth{ClientID: vars["TS_API_CLIENT_ID"], ClientSecret: vars["TS_API_CLIENT_SECRET"]}}
}

func deviceHostnames(ctx context.Context, api *tsapi.Client) ([]string, error) {
	devices, err := api.Devices().List(ctx)
	var names []string
	for _, d := range devices {
		names = append(names, d.Hostname)
	}
	return names, err
}

// deviceNamed waits for the device with this hostname.
func deviceNamed(ctx context.Context, api *tsapi.Client, hostname string) tsapi.Device {
	GinkgoHelper()
	var dev tsapi.Device
	Eventually(func(g Gomega) {
		devices, err := api.Devices().List(ctx)
		g.Expect(err).NotTo(HaveOccurred())
		i := slices.IndexFunc(devices, func(d tsapi.Device) bool { return d.Hostname == hostname })
		g.Expect(i).NotTo(Equal(-1), "device %s", hostname)
		dev = devices[i]
	}).WithContext(ctx).WithTimeout(time.Minute).WithPolling(time.Second).Should(Succeed())
	return dev
}

func deviceID(ctx context.Context, api *tsapi.Client, hostname string) string {
	GinkgoHelper()
	return deviceNamed(ctx, api, hostname).ID
}

// outsideServer serves "outside" over HTTP on an IPv4 address of this
// machine that is neither loopback nor a tailnet address: a destination
// outside the tailnet. (A connector's userspace stack drops packets to
// 127.0.0.0/8 from the tailnet, as a kernel drops martians.)
func outsideServer() netip.AddrPort {
	GinkgoHelper()
	addrs, err := net.InterfaceAddrs()
	Expect(err).NotTo(HaveOccurred())
	var ip netip.Addr
	for _, a := range addrs {
		if p, err := netip.ParsePrefix(a.String()); err == nil && p.Addr().Is4() && p.Addr().IsGlobalUnicast() &&
			!tsaddr.IsTailscaleIP(p.Addr()) && !strings.HasPrefix(p.Addr().String(), "198.18.") {
			ip = p.Addr()
			break
		}
	}
	Expect(ip.IsValid()).To(BeTrue(), "this machine has no non-loopback IPv4 address: %v", addrs)
	ln, err := net.Listen("tcp", netip.AddrPortFrom(ip, 0).String())
	Expect(err).NotTo(HaveOccurred())
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "outside")
	})}
	go func() { _ = srv.Serve(ln) }()
	DeferCleanup(srv.Close)
	return netip.MustParseAddrPort(ln.Addr().String())
}

// getVia GETs http://addr/ over the tailnet only: through the client's
// userspace network stack, whose packets go to the peer that routes addr
// or nowhere (tsnet.Server.Dial would fall back to the host network for an
// address no peer routes, and reach this machine directly).
func (c *tailnetClient) getVia(ctx context.Context, addr netip.AddrPort, timeout time.Duration) (string, error) {
	ns, ok := c.node.Sys().Netstack.Get().(*netstack.Impl)
	if !ok {
		return "", fmt.Errorf("the client has no netstack")
	}
	src, _ := c.node.TailscaleIPs()
	hc := &http.Client{Timeout: timeout, Transport: &http.Transport{DisableKeepAlives: true,
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return ns.DialContextTCPWithBind(ctx, src, addr)
		}}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr.String()+"/", nil)
	if err != nil {
		return "", err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// editPrefs changes a test client's prefs, as `tailscale set` does.
func editPrefs(ctx context.Context, node *tsnet.Server, mp *ipn.MaskedPrefs) {
	GinkgoHelper()
	lc, err := node.LocalClient()
	Expect(err).NotTo(HaveOccurred())
	_, err = lc.EditPrefs(ctx, mp)
	Expect(err).NotTo(HaveOccurred())
}
