package operator

import (
	"fmt"
	"os"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	tsapi "tailscale.com/client/tailscale/v2"
)

// The seed's ProxyGroup (examples/seed/07) with the seed's annotated Service
// (examples/seed/08) and three Ingresses and another L4 Service as members:
// every member is reached by its own MagicDNS name through whichever
// replica control picked, keeps being served when that replica's pod is
// deleted under load, and the group scales; members move between the group
// and dedicated proxies without leftovers.
var _ = Describe("ProxyGroups", Ordered, func() {
	var (
		api    *tsapi.Client
		client *tailnetClient
	)
	const ns = "pg-e2e"

	BeforeAll(func(ctx SpecContext) {
		api = tailnetAPI()
		DeferCleanup(func() {
			_, _ = devcluster("kubectl", "delete", "--ignore-not-found", "-f", "kind-e2e/operator/testdata/proxygroup.yaml")
			_, _ = devcluster("kubectl", "delete", "--ignore-not-found", "proxygroup", "ingress-proxies")
		})
		// The seed names both its Ingress (03) and its ProxyGroup Service
		// (08) my-app: one MagicDNS name. The Ingress's dedicated device,
		// if another spec left it, would shadow the Tailscale Service.
		out, err := devcluster("kubectl", "delete", "--ignore-not-found", "ingress", "my-app")
		Expect(err).NotTo(HaveOccurred(), out)
		Eventually(func() ([]string, error) { return deviceHostnames(ctx, api) }).WithContext(ctx).
			WithTimeout(time.Minute).WithPolling(time.Second).ShouldNot(ContainElement("my-app"))
		applySeed("07-proxygroup.yaml")
		seed, err := os.ReadFile(suite.root + "/examples/seed/08-service-proxygroup.yaml")
		Expect(err).NotTo(HaveOccurred())
		out, err = devcluster("kubectl", "apply", "-f", "kind-e2e/operator/testdata/proxygroup.yaml")
		Expect(err).NotTo(HaveOccurred(), out)
		// The seed's fragment, with what it leaves out ("# ...").
		completed := strings.Replace(string(seed), "  # ...", "  selector: {app: echo}\n  ports:\n    - {port: 80, targetPort: 8080}", 1)
		Expect(completed).NotTo(Equal(string(seed)), "examples/seed/08 no longer ends with the fragment's \"# ...\"")
		out, err = devclusterStdin(completed, "kubectl", "apply", "-n", ns, "-f", "-")
		Expect(err).NotTo(HaveOccurred(), out)
		client = newTailnetClient(ctx, "e2e-pg")
		DeferCleanup(client.close)
	}, NodeTimeout(2*time.Minute))

	AfterEach(func() {
		if CurrentSpecReport().Failed() {
			out, _ := devcluster("kubectl", "logs", "-n", "tailscale", "-l", "tailscale.com/parent-resource=ingress-proxies", "--tail=40", "--prefix")
			AddReportEntry("the group's proxy logs", out)
		}
	})

	It("runs the seed's group of two replicas", func(ctx SpecContext) {
		Eventually(func() (string, error) {
			return devcluster("kubectl", "get", "proxygroup", "ingress-proxies", "-o",
				`jsonpath={.status.conditions[?(@.type=="ProxyGroupReady")].reason} {.status.conditions[?(@.type=="ProxyGroupAvailable")].message} {.status.devices[*].hostname}`)
		}).WithContext(ctx).WithTimeout(3 * time.Minute).WithPolling(time.Second).
			Should(Equal("ProxyGroupReady 2/2 ProxyGroup pods running ingress-proxies-0 ingress-proxies-1"))
	}, SpecTimeout(4*time.Minute))

	It("serves every member under its own name with a real certificate", func(ctx SpecContext) {
		for _, host := range []string{"pg-a", "pg-b", "pg-c"} {
			Eventually(func() (string, error) {
				return devcluster("kubectl", "get", "ingress", "-n", ns, host, "-o", "jsonpath={.status.loadBalancer.ingress[0].hostname}")
			}).WithContext(ctx).WithTimeout(3 * time.Minute).WithPolling(time.Second).Should(Equal(host + ".devcluster.ts.net"))
			Eventually(func() (string, error) {
				_, body, _, err := client.get(ctx, "https://"+host+".devcluster.ts.net/", nil)
				return body, err
			}).WithContext(ctx).WithTimeout(2 * time.Minute).WithPolling(2 * time.Second).Should(ContainSubstring(`"pod":"echo-`))
		}
		Eventually(func() (string, error) {
			_, body, _, err := client.get(ctx, "http://pg-b.devcluster.ts.net/x", nil)
			return body, err
		}).WithContext(ctx).WithTimeout(time.Minute).WithPolling(2 * time.Second).Should(ContainSubstring(`"pod":"echo-`))
		for _, target := range []string{"http://my-app.devcluster.ts.net/", "http://pg-db.devcluster.ts.net:5432/"} {
			Eventually(func() (string, error) {
				_, body, _, err := client.get(ctx, target, nil)
				return body, err
			}).WithContext(ctx).WithTimeout(2*time.Minute).WithPolling(2*time.Second).Should(ContainSubstring(`"pod":"echo-`), target)
		}
		out, err := devcluster("kubectl", "get", "svc", "-n", ns, "my-app", "-o",
			`jsonpath={.status.conditions[?(@.type=="TailscaleIngressSvcConfigured")].message} {.status.loadBalancer.ingress[0].hostname}`)
		Expect(err).NotTo(HaveOccurred(), out)
		Expect(out).To(MatchRegexp(`^[12]/2 proxy backends ready and advertising my-app\.devcluster\.ts\.net$`))
		services, err := api.VIPServices().List(ctx)
		Expect(err).NotTo(HaveOccurred())
		var names []string
		for _, s := range services {
			names = append(names, s.Name)
		}
		Expect(names).To(ContainElements("svc:pg-a", "svc:pg-b", "svc:pg-c", "svc:my-app", "svc:pg-db"))
	}, SpecTimeout(8*time.Minute))

	// The failover measurement of docs/performance.md: 50 requests/s to one
	// member while each replica's pod is deleted in turn, then one is
	// killed; the longest time
	// without a successful response and the failed requests are reported
	// (go tool task bench:proxygroup prints them), and serving must resume.
	It("keeps serving under load while a replica's pod is deleted", Label("bench"), func(ctx SpecContext) {
		load := startLoad(ctx, client, "https://pg-a.devcluster.ts.net/", 50)
		Eventually(load.served).WithContext(ctx).WithTimeout(30 * time.Second).Should(BeNumerically(">", 50))
		out, err := devcluster("kubectl", "get", "pod", "-n", "tailscale", "-l", "tailscale.com/parent-resource=ingress-proxies",
			"-o", "jsonpath={.items[*].metadata.name}")
		Expect(err).NotTo(HaveOccurred(), out)
		pods := strings.Fields(out)
		Expect(pods).To(HaveLen(2))
		// Each pod deleted in turn (SIGTERM: the replica withdraws its
		// services first), then one killed (--grace-period=0 --force:
		// SIGKILL, a crash).
		var deleted time.Time
		for _, step := range []struct {
			pod   string
			force bool
		}{{pods[0], false}, {pods[1], false}, {pods[0], true}} {
			// Both replicas run: the one deleted last is back, Ready, and
			// control routes its services to it (its readiness waits for
			// that), so the next deletion leaves a host.
			Eventually(func() (string, error) {
				return devcluster("kubectl", "get", "proxygroup", "ingress-proxies", "-o",
					`jsonpath={.status.conditions[?(@.type=="ProxyGroupAvailable")].message}`)
			}).WithContext(ctx).WithTimeout(2 * time.Minute).WithPolling(200 * time.Millisecond).Should(Equal("2/2 ProxyGroup pods running"))
			if !deleted.IsZero() {
				back := time.Since(deleted).Round(100 * time.Millisecond)
				AddReportEntry("failover: replica back", back.String())
				GinkgoWriter.Printf("BENCH failover: deleted replica running again (2/2) %v after its deletion\n", back)
			}
			mark := load.mark()
			deleted = time.Now()
			args := []string{"kubectl", "delete", "pod", "-n", "tailscale", step.pod, "--wait=false"}
			how := "deleted"
			if step.force {
				args, how = append(args, "--grace-period=0", "--force"), "killed"
			}
			out, err := devcluster(args...)
			Expect(err).NotTo(HaveOccurred(), out)
			// Serving resumes, and lasts: 20 s of load after the deletion.
			Eventually(func() int64 { return load.served() - mark.served }).WithContext(ctx).WithTimeout(time.Minute).Should(BeNumerically(">", 1000))
			gap, failed, total := load.since(mark)
			AddReportEntry("failover: pod "+how, fmt.Sprintf("longest gap %v, %d of %d requests failed (%.2f%%)", gap.Round(10*time.Millisecond), failed, total, 100*float64(failed)/float64(max(total, 1))))
			GinkgoWriter.Printf("BENCH failover: pod %s %s: longest gap %v, %d of %d requests failed\n", step.pod, how, gap.Round(10*time.Millisecond), failed, total)
			for why, n := range load.failures(mark) {
				GinkgoWriter.Printf("  %d failed: %s\n", n, why)
			}
			// What the client's node went through with its peers.
			for _, line := range client.log.since(mark.at.Add(-time.Second)) {
				if len(line) > 240 {
					line = line[:240]
				}
				GinkgoWriter.Println("  client:", line)
			}
			// What the replicas said about advertising and readiness.
			for _, pod := range pods {
				out, _ := devcluster("kubectl", "logs", "-n", "tailscale", pod, "--since=40s")
				for _, line := range strings.Split(out, "\n") {
					if strings.Contains(line, "advertis") || strings.Contains(line, "ready") || strings.Contains(line, "withdr") {
						GinkgoWriter.Println("  "+pod+":", line)
					}
				}
			}
			// What control did meanwhile, from devcluster's log.
			if log, err := os.ReadFile(suite.dir + ".log"); err == nil {
				for _, line := range strings.Split(string(log), "\n") {
					if strings.Contains(line, "svc:pg-a") && !strings.Contains(line, "saved through") && len(line) >= 19 && line[:19] >= mark.at.UTC().Format("2006/01/02 15:04:05") {
						GinkgoWriter.Println("  control:", line)
					}
				}
			}
		}
		load.stop()
	}, SpecTimeout(5*time.Minute))

	// The side-by-side latency of docs/performance.md: the same echo through
	// a member of the two-replica group and through the seed's Ingress on
	// a dedicated proxy, alternating, 200 requests each on kept-alive
	// connections.
	It("measures request latency through the group next to a dedicated proxy", Label("bench"), func(ctx SpecContext) {
		// The seed's ProxyGroup Service my-app gives way to the seed's
		// Ingress my-app (one name), which is measured here.
		out, err := devcluster("kubectl", "delete", "svc", "-n", ns, "my-app", "--wait=true")
		Expect(err).NotTo(HaveOccurred(), out)
		Eventually(func() (bool, error) {
			_, err := api.VIPServices().Get(ctx, "svc:my-app")
			return tsapi.IsNotFound(err), nil
		}).WithContext(ctx).WithTimeout(time.Minute).WithPolling(time.Second).Should(BeTrue(), "svc:my-app deleted")
		out, err = devcluster("kubectl", "apply", "-f", "kind-e2e/operator/testdata/echo.yaml", "-f", "examples/seed/03-ingress.yaml")
		Expect(err).NotTo(HaveOccurred(), out)
		targets := []string{"https://pg-a.devcluster.ts.net/", "https://my-app.devcluster.ts.net/"}
		for _, t := range targets {
			Eventually(func() (string, error) {
				_, body, _, err := client.get(ctx, t, nil)
				return body, err
			}).WithContext(ctx).WithTimeout(3*time.Minute).WithPolling(2*time.Second).Should(ContainSubstring(`"pod":`), t)
		}
		took := map[string][]time.Duration{}
		spent := map[string]time.Duration{}
		for range 200 {
			for _, t := range targets {
				code, _, d, err := client.get(ctx, t, nil)
				Expect(err).NotTo(HaveOccurred())
				Expect(code).To(Equal(200))
				took[t] = append(took[t], d)
				spent[t] += d
			}
		}
		for _, t := range targets {
			p50, p99 := percentile(took[t], 50), percentile(took[t], 99)
			rps := float64(len(took[t])) / spent[t].Seconds()
			AddReportEntry("latency "+t, fmt.Sprintf("p50 %v p99 %v, %.0f requests/s sequential", p50, p99, rps))
			GinkgoWriter.Printf("BENCH latency %s: p50 %v p99 %v, %.0f requests/s sequential\n", t, p50.Round(10*time.Microsecond), p99.Round(10*time.Microsecond), rps)
		}
	}, SpecTimeout(6*time.Minute))

	It("scales 2 -> 3 -> 1, creating and deleting devices, still serving", func(ctx SpecContext) {
		scale := func(n int) {
			out, err := devcluster("kubectl", "patch", "proxygroup", "ingress-proxies", "--type=merge", "-p", fmt.Sprintf(`{"spec":{"replicas":%d}}`, n))
			Expect(err).NotTo(HaveOccurred(), out)
		}
		groupDevices := func() ([]string, error) {
			names, err := deviceHostnames(ctx, api)
			var out []string
			for _, n := range names {
				if strings.HasPrefix(n, "ingress-proxies-") {
					out = append(out, n)
				}
			}
			return out, err
		}
		scale(3)
		Eventually(groupDevices).WithContext(ctx).WithTimeout(3 * time.Minute).WithPolling(time.Second).
			Should(ConsistOf("ingress-proxies-0", "ingress-proxies-1", "ingress-proxies-2"))
		scale(1)
		Eventually(groupDevices).WithContext(ctx).WithTimeout(2 * time.Minute).WithPolling(time.Second).Should(ConsistOf("ingress-proxies-0"))
		Eventually(func() (string, error) {
			_, body, _, err := client.get(ctx, "https://pg-c.devcluster.ts.net/", nil)
			return body, err
		}).WithContext(ctx).WithTimeout(2 * time.Minute).WithPolling(2 * time.Second).Should(ContainSubstring(`"pod":"echo-`))
		scale(2)
	}, SpecTimeout(6*time.Minute))

	It("moves an Ingress to a dedicated proxy and back without leftovers", func(ctx SpecContext) {
		out, err := devcluster("kubectl", "annotate", "ingress", "-n", ns, "pg-c", "tailscale.com/proxy-group-")
		Expect(err).NotTo(HaveOccurred(), out)
		Eventually(func() (bool, error) {
			_, err := api.VIPServices().Get(ctx, "svc:pg-c")
			return tsapi.IsNotFound(err), nil
		}).WithContext(ctx).WithTimeout(time.Minute).WithPolling(time.Second).Should(BeTrue(), "svc:pg-c deleted")
		deviceNamed(ctx, api, "pg-c")
		Eventually(func() (string, error) {
			_, body, _, err := client.get(ctx, "https://pg-c.devcluster.ts.net/", nil)
			return body, err
		}).WithContext(ctx).WithTimeout(3 * time.Minute).WithPolling(2 * time.Second).Should(ContainSubstring(`"pod":"echo-`))
		out, err = devcluster("kubectl", "annotate", "ingress", "-n", ns, "pg-c", "tailscale.com/proxy-group=ingress-proxies")
		Expect(err).NotTo(HaveOccurred(), out)
		Eventually(func() ([]string, error) { return deviceHostnames(ctx, api) }).WithContext(ctx).WithTimeout(2*time.Minute).
			WithPolling(time.Second).ShouldNot(ContainElement("pg-c"), "the dedicated proxy's device is deleted")
		Eventually(func() (string, error) {
			_, body, _, err := client.get(ctx, "https://pg-c.devcluster.ts.net/", nil)
			return body, err
		}).WithContext(ctx).WithTimeout(3 * time.Minute).WithPolling(2 * time.Second).Should(ContainSubstring(`"pod":"echo-`))
	}, SpecTimeout(8*time.Minute))

	It("cleans up the Tailscale Services when the members go, and the devices with the group", func(ctx SpecContext) {
		out, err := devcluster("kubectl", "delete", "ingress,svc", "-n", ns, "--all", "--wait=true")
		Expect(err).NotTo(HaveOccurred(), out)
		Eventually(func() ([]tsapi.VIPService, error) { return api.VIPServices().List(ctx) }).WithContext(ctx).
			WithTimeout(time.Minute).WithPolling(time.Second).Should(BeEmpty())
		out, err = devcluster("kubectl", "delete", "proxygroup", "ingress-proxies", "--wait=true")
		Expect(err).NotTo(HaveOccurred(), out)
		Eventually(func() ([]string, error) { return deviceHostnames(ctx, api) }).WithContext(ctx).WithTimeout(time.Minute).
			WithPolling(time.Second).ShouldNot(ContainElement(HavePrefix("ingress-proxies-")))
	}, SpecTimeout(4*time.Minute))
})
