package operator

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	tsapi "tailscale.com/client/tailscale/v2"
)

// Multi-cluster Tailscale Services (docs/operator.md, "One Ingress in
// several clusters"): a second devcluster joins the suite's tailnet (up
// --tailnet-from), both clusters serve the same HA Ingress from an ingress
// ProxyGroup of their own, the Tailscale Service names both operators as
// the official operator writes them, and traffic at 50 requests/s keeps
// being served while either cluster's whole ProxyGroup is deleted. The
// failover gaps are docs/performance.md's.
var _ = Describe("One Ingress in two clusters", Ordered, Label(processNodeOnly), func() {
	const (
		service = "svc:mc-web"
		target  = "https://mc-web.devcluster.ts.net/"
	)
	var (
		api    *tsapi.Client
		client *tailnetClient
		a, b   string // the clusters' folders
	)

	BeforeAll(func(ctx SpecContext) {
		skipIfExternal("starts a second devcluster on the suite's tailnet")
		api = tailnetAPI()
		a, b = suite.clusterDir(), filepath.Join(suite.dir, "cluster-b")
		stopB := startSecondCluster(ctx, b, a)
		DeferCleanup(func() {
			_, _ = devclusterAt(a, "", "kubectl", "delete", "--ignore-not-found", "namespace", "mc-e2e")
			_, _ = devclusterAt(a, "", "kubectl", "delete", "--ignore-not-found", "proxygroup", "mc-proxies")
			stopB()
		})
		client = newTailnetClient(ctx, "e2e-multicluster")
		DeferCleanup(client.close)
	}, NodeTimeout(5*time.Minute))

	AfterEach(func() {
		if !CurrentSpecReport().Failed() {
			return
		}
		for _, dir := range []string{a, b} {
			out, _ := devclusterAt(dir, "", "kubectl", "get", "pods,proxygroups", "-A", "-o", "wide")
			AddReportEntry("objects of "+dir, out)
			out, _ = devclusterAt(dir, "", "kubectl", "logs", "-n", "tailscale", "-l", "tailscale.com/parent-resource=mc-proxies", "--tail=30", "--prefix")
			AddReportEntry("the group's proxy logs in "+dir, out)
			out, _ = devclusterAt(dir, "", "kubectl", "logs", "-n", "tailscale", "deploy/operator", "--tail=40")
			AddReportEntry("the operator's log in "+dir, out)
		}
	})

	apply := func(dir, cluster string) {
		GinkgoHelper()
		manifest, err := os.ReadFile(filepath.Join(suite.root, "kind-e2e/operator/testdata/multicluster.yaml"))
		Expect(err).NotTo(HaveOccurred())
		out, err := devclusterAt(dir, strings.ReplaceAll(string(manifest), "CLUSTER", cluster), "kubectl", "apply", "-f", "-")
		Expect(err).NotTo(HaveOccurred(), out)
	}
	// answeredBy waits until the service is answered from cluster's echo.
	answeredBy := func(ctx context.Context, cluster string) {
		GinkgoHelper()
		Eventually(func() (string, error) {
			_, body, _, err := client.get(ctx, target, nil)
			return body, err
		}).WithContext(ctx).WithTimeout(3*time.Minute).WithPolling(time.Second).Should(ContainSubstring(`"pod":"echo-`+cluster+`-`), "answered by cluster "+cluster)
	}
	groupAvailable := func(ctx context.Context, dir string) {
		GinkgoHelper()
		Eventually(func() (string, error) {
			return devclusterAt(dir, "", "kubectl", "get", "proxygroup", "mc-proxies", "-o",
				`jsonpath={.status.conditions[?(@.type=="ProxyGroupAvailable")].message}`)
		}).WithContext(ctx).WithTimeout(3 * time.Minute).WithPolling(time.Second).Should(Equal("2/2 ProxyGroup pods running"))
	}
	operatorIDs := func(ctx context.Context) ([]string, error) {
		svc, err := api.VIPServices().Get(ctx, service)
		if err != nil {
			return nil, err
		}
		var refs struct {
			OwnerRefs []struct {
				OperatorID string          `json:"operatorID"`
				Resource   json.RawMessage `json:"resource"`
			} `json:"ownerRefs"`
		}
		if err := json.Unmarshal([]byte(svc.Annotations["tailscale.com/owner-references"]), &refs); err != nil {
			return nil, err
		}
		var ids []string
		for _, r := range refs.OwnerRefs {
			Expect(r.Resource).To(BeEmpty(), "a shared service's owner reference names only the operator, as the official operator's")
			ids = append(ids, r.OperatorID)
		}
		return ids, nil
	}
	sharedEvent := func(dir string) (string, error) {
		return devclusterAt(dir, "", "kubectl", "get", "events", "-n", "mc-e2e", "--field-selector", "reason=TailscaleServiceShared,involvedObject.kind=Ingress",
			"-o", "jsonpath={.items[*].message}")
	}

	It("serves the same Ingress from both clusters, each naming the other operator", func(ctx SpecContext) {
		apply(a, "a")
		groupAvailable(ctx, a)
		answeredBy(ctx, "a")
		Expect(operatorIDs(ctx)).To(HaveLen(1))
		apply(b, "b")
		groupAvailable(ctx, b)
		Eventually(func() ([]string, error) { return operatorIDs(ctx) }).WithContext(ctx).WithTimeout(2 * time.Minute).
			WithPolling(time.Second).Should(HaveLen(2))
		ids, err := operatorIDs(ctx)
		Expect(err).NotTo(HaveOccurred())
		named := map[string]string{}
		for _, dir := range []string{a, b} {
			Eventually(func() (string, error) {
				return devclusterAt(dir, "", "kubectl", "get", "ingress", "-n", "mc-e2e", "web", "-o", "jsonpath={.status.loadBalancer.ingress[0].hostname}")
			}).WithContext(ctx).WithTimeout(3*time.Minute).WithPolling(time.Second).Should(Equal("mc-web.devcluster.ts.net"), dir)
			// Each cluster's Ingress names the operator of the other one
			// (by its device's MagicDNS name and ID), never its own.
			Eventually(func() (string, error) { return sharedEvent(dir) }).WithContext(ctx).WithTimeout(2*time.Minute).WithPolling(time.Second).
				Should(ContainSubstring("Tailscale Service svc:mc-web is also served by the operator of another cluster: "), dir)
			msg, err := sharedEvent(dir)
			Expect(err).NotTo(HaveOccurred())
			for _, id := range ids {
				if strings.Contains(msg, "("+id+")") {
					Expect(named).NotTo(HaveKey(dir), "one other operator named: %s", msg)
					named[dir] = id
				}
			}
			Expect(named).To(HaveKey(dir), "an owner of the service named: %s", msg)
		}
		Expect(named[a]).NotTo(Equal(named[b]), "each cluster names the other's operator")
	}, SpecTimeout(8*time.Minute))

	// The measurement of docs/performance.md, "Multi-cluster failover":
	// 50 requests/s while one cluster's whole ProxyGroup is deleted, then,
	// once it is back, the other's.
	It("keeps serving while either cluster's whole ProxyGroup is deleted", Label("bench"), func(ctx SpecContext) {
		load := startLoad(ctx, client, target, 50)
		defer load.stop()
		Eventually(load.served).WithContext(ctx).WithTimeout(30 * time.Second).Should(BeNumerically(">", 50))
		for _, step := range []struct{ gone, dir, stays string }{{"a", a, "b"}, {"b", b, "a"}} {
			groupAvailable(ctx, a)
			groupAvailable(ctx, b)
			mark := load.mark()
			out, err := devclusterAt(step.dir, "", "kubectl", "delete", "proxygroup", "mc-proxies", "--wait=false")
			Expect(err).NotTo(HaveOccurred(), out)
			answeredBy(ctx, step.stays)
			Eventually(func() int64 { return load.served() - mark.served }).WithContext(ctx).WithTimeout(time.Minute).Should(BeNumerically(">", 1000))
			gap, failed, total := load.since(mark)
			AddReportEntry("multi-cluster failover: cluster "+step.gone+"'s ProxyGroup deleted",
				fmt.Sprintf("longest gap %v, %d of %d requests failed", gap.Round(10*time.Millisecond), failed, total))
			GinkgoWriter.Printf("BENCH multi-cluster failover: cluster %s's ProxyGroup deleted: longest gap %v, %d of %d requests failed\n",
				step.gone, gap.Round(10*time.Millisecond), failed, total)
			for why, n := range load.failures(mark) {
				GinkgoWriter.Printf("  %d failed: %s\n", n, why)
			}
			// The deleted group took only its own: the service and the
			// other cluster's reference stay, its own reference too (its
			// Ingress still names the group).
			Expect(operatorIDs(ctx)).To(HaveLen(2))
			apply(step.dir, step.gone)
		}
	}, SpecTimeout(12*time.Minute))

	It("deleting one cluster's Ingress withdraws only its operator; the last one deletes the service", func(ctx SpecContext) {
		before, err := operatorIDs(ctx)
		Expect(err).NotTo(HaveOccurred())
		out, err := devclusterAt(a, "", "kubectl", "delete", "ingress", "-n", "mc-e2e", "web", "--wait=true")
		Expect(err).NotTo(HaveOccurred(), out)
		Eventually(func() ([]string, error) { return operatorIDs(ctx) }).WithContext(ctx).WithTimeout(time.Minute).WithPolling(time.Second).
			Should(HaveLen(1))
		after, err := operatorIDs(ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(before).To(ContainElement(after[0]))
		answeredBy(ctx, "b")
		out, err = devclusterAt(b, "", "kubectl", "delete", "ingress", "-n", "mc-e2e", "web", "--wait=true")
		Expect(err).NotTo(HaveOccurred(), out)
		Eventually(func() bool {
			_, err := api.VIPServices().Get(ctx, service)
			return tsapi.IsNotFound(err)
		}).WithContext(ctx).WithTimeout(time.Minute).WithPolling(time.Second).Should(BeTrue(), service+" deleted with its last owner")
		for _, dir := range []string{a, b} {
			out, err := devclusterAt(dir, "", "kubectl", "delete", "proxygroup", "mc-proxies", "--wait=true")
			Expect(err).NotTo(HaveOccurred(), out)
		}
		Eventually(func() ([]string, error) { return deviceHostnames(ctx, api) }).WithContext(ctx).WithTimeout(time.Minute).
			WithPolling(time.Second).ShouldNot(ContainElement(HavePrefix("mc-proxies-")))
	}, SpecTimeout(6*time.Minute))
})

// startSecondCluster starts a devcluster in dir on the tailnet of the one
// in from, with the operator installed from the chart (devinstall, as go
// tool task dev runs it, with the binaries the suite's run built), and
// returns what stops it and removes its folder.
func startSecondCluster(ctx context.Context, dir, from string) (stop func()) {
	GinkgoHelper()
	assets := filepath.Dir(suite.devcluster)
	// Next to the suite's own log, outside its folder: kept when a spec
	// fails.
	logPath := suite.dir + "-" + filepath.Base(dir) + ".log"
	logFile, err := os.Create(logPath)
	Expect(err).NotTo(HaveOccurred())
	cmd := exec.Command(filepath.Join(assets, "devinstall"), "--dir", dir, "--up", suite.devcluster, "--bin", filepath.Join(suite.root, "bin"),
		"--", "--tailnet-from", from)
	cmd.Dir = suite.root
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var exitErr error
	installed, exited := startInstalling(cmd, logFile, &exitErr)
	stop = func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGINT)
		select {
		case <-exited:
		case <-time.After(time.Minute):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-exited
		}
		_ = exec.Command(suite.devcluster, "down", "--dir", dir).Run()
		_ = os.RemoveAll(dir)
		if !CurrentSpecReport().Failed() {
			_ = os.Remove(logPath)
		}
	}
	select {
	case <-installed:
	case <-exited:
		stop()
		Fail("the second cluster's devinstall exited before the operator was installed; see " + logPath)
	case <-ctx.Done():
		stop()
		Fail("the second cluster's operator was not installed in time; see " + logPath)
	}
	return stop
}
