package operator

import (
	"context"
	"fmt"
	"net/netip"
	"net/url"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	tsapi "tailscale.com/client/tailscale/v2"
)

// A Tailnet (the official kind) naming the second tailnet of devcluster up
// --tailnets 2 (which BeforeSuite passes), and a ProxyGroup with
// spec.tailnet on it serving an Ingress: its device is made by the second
// tailnet's control, a client of that tailnet reaches the Ingress and a
// client of the operator's tailnet cannot; a Connector with spec.tailnet
// gets its device and route there too (both tailnets behind one control
// URL, told apart by credentials); the Tailnet's Secret deleted and
// restored is reported with the official reason; deleting the group
// deletes its device there and leaves no Secret or finalizer.
var _ = Describe("a ProxyGroup on a second tailnet", Ordered, func() {
	const (
		tailnetName = "second-tailnet"
		secretName  = "second-tailnet-credentials"
		group       = "second-pg"
		ns          = "tn-e2e"
	)
	var (
		env           map[string]string
		first, second *tsapi.Client
		host          string // the Ingress's MagicDNS name on the second tailnet
	)

	createSecret := func() {
		GinkgoHelper()
		out, err := devcluster("kubectl", "create", "secret", "generic", "-n", "tailscale", secretName,
			"--from-literal=client_id="+env["SECOND_TS_API_CLIENT_ID"], "--from-literal=client_secret="+env["SECOND_TS_API_CLIENT_SECRET"])
		Expect(err).NotTo(HaveOccurred(), out)
	}
	tailnetReady := func() (string, error) {
		return devcluster("kubectl", "get", "tailnet", tailnetName, "-o",
			`jsonpath={.status.conditions[?(@.type=="TailnetReady")].status} {.status.conditions[?(@.type=="TailnetReady")].reason} {.status.conditions[?(@.type=="TailnetReady")].message}`)
	}
	groupReady := func() (string, error) {
		return devcluster("kubectl", "get", "proxygroup", group, "-o",
			`jsonpath={.status.conditions[?(@.type=="ProxyGroupReady")].reason} {.status.devices[*].hostname}`)
	}
	groupDevices := func(ctx context.Context, api *tsapi.Client) func() ([]string, error) {
		return func() ([]string, error) {
			names, err := deviceHostnames(ctx, api)
			var out []string
			for _, n := range names {
				if strings.HasPrefix(n, group+"-") {
					out = append(out, n)
				}
			}
			return out, err
		}
	}

	BeforeAll(func(ctx SpecContext) {
		env = tailnetEnv()
		Expect(env["SECOND_TS_CONTROL_URL"]).NotTo(BeEmpty(), "BeforeSuite starts devcluster with --tailnets 2")
		first = tailnetAPI()
		base, err := url.Parse(env["SECOND_TS_API_URL"])
		Expect(err).NotTo(HaveOccurred())
		second = &tsapi.Client{BaseURL: base, Tailnet: "-", Auth: &tsapi.OAuth{
			ClientID: env["SECOND_TS_API_CLIENT_ID"], ClientSecret: env["SECOND_TS_API_CLIENT_SECRET"]}}
		host = "second-app." + env["SECOND_TS_MAGICDNS_DOMAIN"]
		DeferCleanup(func() {
			_, _ = devcluster("kubectl", "delete", "--ignore-not-found", "-f", "kind-e2e/operator/testdata/second-tailnet.yaml")
			_, _ = devcluster("kubectl", "delete", "--ignore-not-found", "proxygroup", group)
			_, _ = devcluster("kubectl", "delete", "--ignore-not-found", "tailnet", tailnetName)
			_, _ = devcluster("kubectl", "delete", "--ignore-not-found", "secret", "-n", "tailscale", secretName)
		})
		createSecret()
		Expect(kubectlApply(fmt.Sprintf(`
apiVersion: tailscale.com/v1alpha1
kind: Tailnet
metadata:
  name: %s
spec:
  loginUrl: %s
  credentials:
    secretName: %s
`, tailnetName, env["SECOND_TS_CONTROL_URL"], secretName))).To(Succeed())
		out, err := devcluster("kubectl", "apply", "-f", "kind-e2e/operator/testdata/second-tailnet.yaml")
		Expect(err).NotTo(HaveOccurred(), out)
	}, NodeTimeout(time.Minute))

	AfterEach(func() {
		if CurrentSpecReport().Failed() {
			out, _ := devcluster("kubectl", "logs", "-n", "tailscale", "-l", "tailscale.com/parent-resource="+group, "--tail=40", "--prefix")
			AddReportEntry("the group's proxy logs", out)
			out, _ = devcluster("kubectl", "get", "tailnet,proxygroup", "-o", "yaml")
			AddReportEntry("Tailnets and ProxyGroups", out)
		}
	})

	It("checks the Tailnet's credentials: TailnetReady True, TailnetValid", func(ctx SpecContext) {
		Eventually(tailnetReady).WithContext(ctx).WithTimeout(time.Minute).WithPolling(time.Second).
			Should(HavePrefix("True TailnetValid"))
		out, err := devcluster("kubectl", "get", "tn", tailnetName)
		Expect(err).NotTo(HaveOccurred(), out)
		Expect(out).To(ContainSubstring("TailnetValid"), "kubectl get tn shows the reason")
	}, SpecTimeout(2*time.Minute))

	It("serves the group's Ingress on the second tailnet, to that tailnet's clients only", func(ctx SpecContext) {
		Expect(kubectlApply(fmt.Sprintf(`
apiVersion: tailscale.com/v1alpha1
kind: ProxyGroup
metadata:
  name: %s
spec:
  type: ingress
  replicas: 1
  tailnet: %s
`, group, tailnetName))).To(Succeed())
		Eventually(groupReady).WithContext(ctx).WithTimeout(3 * time.Minute).WithPolling(time.Second).
			Should(Equal("ProxyGroupReady " + group + "-0"))

		By("its device is the second tailnet's, not the operator's")
		Eventually(groupDevices(ctx, second)).WithContext(ctx).WithTimeout(time.Minute).WithPolling(time.Second).
			Should(ConsistOf(group + "-0"))
		Expect(groupDevices(ctx, first)()).To(BeEmpty(), "devices of the group on the operator's tailnet")
		dev := deviceNamed(ctx, second, group+"-0")
		Expect(dev.Tags).To(ConsistOf("tag:k8s"))
		Expect(dev.Name).To(Equal(group + "-0." + env["SECOND_TS_MAGICDNS_DOMAIN"]))

		By("the Ingress is a Tailscale Service of the second tailnet")
		Eventually(func() (string, error) {
			return devcluster("kubectl", "get", "ingress", "-n", ns, "second-app", "-o", "jsonpath={.status.loadBalancer.ingress[0].hostname}")
		}).WithContext(ctx).WithTimeout(3 * time.Minute).WithPolling(time.Second).Should(Equal(host))
		svc, err := second.VIPServices().Get(ctx, "svc:second-app")
		Expect(err).NotTo(HaveOccurred())
		_, err = first.VIPServices().Get(ctx, "svc:second-app")
		Expect(tsapi.IsNotFound(err)).To(BeTrue(), "svc:second-app on the operator's tailnet: %v", err)

		By("devcluster curl --tailnet 2 reaches it with a certificate of the cluster's CA")
		Eventually(func() (string, error) {
			return devcluster("curl", "--tailnet", "2", "--timeout", "30s", "https://"+host+"/")
		}).WithContext(ctx).WithTimeout(3 * time.Minute).WithPolling(2 * time.Second).Should(ContainSubstring(`"pod":"second-echo-`))

		By("a client of the second tailnet reaches it; one of the operator's tailnet does not")
		inSecond := newTailnetClientOf(ctx, "e2e-second", "SECOND_")
		DeferCleanup(inSecond.close)
		Eventually(func() (string, error) {
			_, body, _, err := inSecond.get(ctx, "https://"+host+"/", nil)
			return body, err
		}).WithContext(ctx).WithTimeout(time.Minute).WithPolling(2 * time.Second).Should(ContainSubstring(`"pod":"second-echo-`))
		inFirst := newTailnetClient(ctx, "e2e-first")
		DeferCleanup(inFirst.close)
		lc, err := inFirst.node.LocalClient()
		Expect(err).NotTo(HaveOccurred())
		st, err := lc.Status(ctx)
		Expect(err).NotTo(HaveOccurred())
		for _, p := range st.Peer {
			Expect(p.HostName).NotTo(HavePrefix(group+"-"), "a peer in the operator's tailnet's netmap")
			Expect(p.DNSName).NotTo(HaveSuffix(env["SECOND_TS_MAGICDNS_DOMAIN"] + "."))
		}
		_, _, _, err = inFirst.get(ctx, "https://"+host+"/", nil)
		Expect(err).To(HaveOccurred(), "%s resolved and answered on the operator's tailnet", host)
		// Its addresses, dialed from the operator's tailnet over the
		// tailnet only: nothing there answers as this Ingress (the two
		// tailnets hand out addresses from the same range, so an address
		// may be another device's there).
		var addrs []string
		addrs = append(addrs, svc.Addrs...)
		addrs = append(addrs, dev.Addresses...)
		Expect(addrs).NotTo(BeEmpty())
		for _, a := range addrs {
			ip, err := netip.ParseAddr(a)
			Expect(err).NotTo(HaveOccurred())
			if !ip.Is4() {
				continue
			}
			body, err := inFirst.getVia(ctx, netip.AddrPortFrom(ip, 80), 3*time.Second)
			if err == nil {
				Expect(body).NotTo(ContainSubstring(`"pod":"second-echo-`), "%s reached from the operator's tailnet", ip)
			}
		}
	}, SpecTimeout(8*time.Minute))

	It("reports the Tailnet's Secret deleted (InvalidSecret) and recovers when it is back", func(ctx SpecContext) {
		out, err := devcluster("kubectl", "delete", "secret", "-n", "tailscale", secretName)
		Expect(err).NotTo(HaveOccurred(), out)
		Eventually(tailnetReady).WithContext(ctx).WithTimeout(time.Minute).WithPolling(time.Second).
			Should(Equal(fmt.Sprintf(`False InvalidSecret referenced secret %q does not exist in namespace "tailscale"`, secretName)))
		Eventually(groupReady).WithContext(ctx).WithTimeout(time.Minute).WithPolling(time.Second).
			Should(HavePrefix("ProxyGroupTailnetUnavailable"))
		out, err = devcluster("kubectl", "get", "events", "--field-selector", "involvedObject.name="+tailnetName+",reason=InvalidSecret", "-o", "jsonpath={.items[*].message}")
		Expect(err).NotTo(HaveOccurred(), out)
		Expect(out).To(ContainSubstring("does not exist"), "the Warning Event")
		// The running proxy keeps its device meanwhile.
		Expect(devcluster("curl", "--tailnet", "2", "--timeout", "30s", "https://"+host+"/")).To(ContainSubstring(`"pod":"second-echo-`))

		createSecret()
		Eventually(tailnetReady).WithContext(ctx).WithTimeout(time.Minute).WithPolling(time.Second).Should(HavePrefix("True TailnetValid"))
		Eventually(groupReady).WithContext(ctx).WithTimeout(2 * time.Minute).WithPolling(time.Second).
			Should(Equal("ProxyGroupReady " + group + "-0"))
		Expect(groupDevices(ctx, second)()).To(ConsistOf(group+"-0"), "the same device, none made again")
	}, SpecTimeout(5*time.Minute))

	It("runs a Connector with spec.tailnet in the second tailnet, behind the same control URL", func(ctx SpecContext) {
		Expect(env["SECOND_TS_CONTROL_URL"]).To(Equal(env["TS_CONTROL_URL"]), "one control server, told apart by credentials")
		const connector, route = "second-conn", "10.77.0.0/24"
		Expect(kubectlApply(fmt.Sprintf(`
apiVersion: tailscale.com/v1alpha1
kind: Connector
metadata:
  name: %s
spec:
  tailnet: %s
  subnetRouter:
    advertiseRoutes: [%q]
`, connector, tailnetName, route))).To(Succeed())
		DeferCleanup(func() { _, _ = devcluster("kubectl", "delete", "--ignore-not-found", "connector", connector) })
		Expect(waitConnectorReady(ctx, connector, 1)).To(ConsistOf(HavePrefix(connector + "-connector.")))

		By("its device is the second tailnet's, with its route, and not the operator's")
		dev := deviceNamed(ctx, second, connector+"-connector")
		Expect(dev.Name).To(Equal(connector + "-connector." + env["SECOND_TS_MAGICDNS_DOMAIN"]))
		Eventually(func() ([]string, error) {
			r, err := second.Devices().SubnetRoutes(ctx, dev.ID)
			if err != nil {
				return nil, err
			}
			return r.Advertised, nil
		}).WithContext(ctx).WithTimeout(time.Minute).WithPolling(time.Second).Should(ConsistOf(route))
		Expect(deviceHostnames(ctx, first)).NotTo(ContainElement(connector+"-connector"), "the Connector's device on the operator's tailnet")
		_, err := first.Devices().Get(ctx, dev.ID)
		Expect(tsapi.IsNotFound(err)).To(BeTrue(), "the operator's tailnet's token reads the second tailnet's device: %v", err)

		By("deleting the Connector deletes its device in the second tailnet")
		out, err := devcluster("kubectl", "delete", "connector", connector, "--wait=true", "--timeout=2m")
		Expect(err).NotTo(HaveOccurred(), out)
		Eventually(func() ([]string, error) { return deviceHostnames(ctx, second) }).WithContext(ctx).WithTimeout(time.Minute).
			WithPolling(time.Second).ShouldNot(ContainElement(connector + "-connector"))
	}, SpecTimeout(4*time.Minute))

	It("deletes the group's device and Tailscale Service from the second tailnet, leaving no Secret or finalizer", func(ctx SpecContext) {
		selector := "tailscale.com/parent-resource=" + group
		out, err := devcluster("kubectl", "get", "secret", "-n", "tailscale", "-l", selector, "-o", "name")
		Expect(err).NotTo(HaveOccurred(), out)
		Expect(out).NotTo(BeEmpty(), "the group's Secrets, before")

		out, err = devcluster("kubectl", "delete", "ingress", "-n", ns, "second-app", "--wait=true", "--timeout=2m")
		Expect(err).NotTo(HaveOccurred(), out)
		Eventually(func() bool {
			_, err := second.VIPServices().Get(ctx, "svc:second-app")
			return tsapi.IsNotFound(err)
		}).WithContext(ctx).WithTimeout(time.Minute).WithPolling(time.Second).Should(BeTrue(), "svc:second-app deleted")
		out, err = devcluster("kubectl", "delete", "proxygroup", group, "--wait=true", "--timeout=2m")
		Expect(err).NotTo(HaveOccurred(), out)
		Eventually(groupDevices(ctx, second)).WithContext(ctx).WithTimeout(time.Minute).WithPolling(time.Second).Should(BeEmpty())
		Eventually(func() (string, error) {
			return devcluster("kubectl", "get", "secret,statefulset,pod", "-n", "tailscale", "-l", selector, "-o", "name")
		}).WithContext(ctx).WithTimeout(time.Minute).WithPolling(time.Second).Should(BeEmpty())

		out, err = devcluster("kubectl", "delete", "tailnet", tailnetName, "--wait=true", "--timeout=1m")
		Expect(err).NotTo(HaveOccurred(), "the Tailnet's finalizer is released: %s", out)
		out, err = devcluster("kubectl", "get", "proxygroup,tailnet", "-o", "name")
		Expect(err).NotTo(HaveOccurred(), out)
		Expect(out).NotTo(ContainSubstring(group))
		Expect(out).NotTo(ContainSubstring(tailnetName))
	}, SpecTimeout(5*time.Minute))
})
