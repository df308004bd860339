package realnode

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// Names the real node uses (kind-e2e/internal/realnode); repeated here so
// that the suite checks devcluster from outside.
const (
	echoImage   = "ghcr.io/tailplane/echo:dev"
	podCIDR     = "198.19.0.0/24"
	serviceCIDR = "198.19.128.0/20"
	dnsIP       = "198.19.128.10"
	bridge      = "dcbr0"
	nodeIP      = "198.19.0.1"
)

var _ = Describe("The real node", Ordered, func() {
	var c *cluster
	BeforeAll(func() { c = suiteCluster })

	It("is a Ready node whose kubelet is v1.37.2 on containerd", func(ctx SpecContext) {
		node, err := c.client.CoreV1().Nodes().Get(ctx, "devcluster", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(node.Status.NodeInfo.KubeletVersion).To(Equal("v1.37.2"))
		Expect(node.Status.NodeInfo.ContainerRuntimeVersion).To(HavePrefix("containerd://"))
		Expect(node.Status.Conditions).To(ContainElement(And(
			HaveField("Type", corev1.NodeReady), HaveField("Status", corev1.ConditionTrue))))
	})

	It("runs a real container from an imported image: its own IP and files, kubectl logs and exec", func(ctx SpecContext) {
		pod := echoPod("echo", nil)
		_, err := c.client.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		var ip string
		Eventually(func(g Gomega) {
			p, err := c.client.CoreV1().Pods("default").Get(ctx, "echo", metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(p.Status.Phase).To(Equal(corev1.PodRunning))
			ip = p.Status.PodIP
		}).WithContext(ctx).WithTimeout(time.Minute).Should(Succeed())
		Expect(netip.MustParsePrefix(podCIDR).Contains(netip.MustParseAddr(ip))).To(BeTrue(), "pod IP %s not in %s", ip, podCIDR)

		By("reaching the pod on its own address through the bridge")
		Eventually(func(g Gomega) {
			resp, err := http.Get("http://" + ip + ":8080/")
			g.Expect(err).NotTo(HaveOccurred())
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			g.Expect(string(b)).To(ContainSubstring(`"host":"echo"`))
		}).WithContext(ctx).WithTimeout(30 * time.Second).Should(Succeed())

		By("kubectl logs through the kubelet")
		Eventually(func(g Gomega) {
			out, err := c.kubectl(ctx, "logs", "echo")
			g.Expect(err).NotTo(HaveOccurred(), out)
			g.Expect(out).To(ContainSubstring("serving"))
		}).WithContext(ctx).WithTimeout(30 * time.Second).Should(Succeed())

		By("kubectl exec in the container's own root filesystem")
		out, err := c.kubectl(ctx, "exec", "echo", "--", "devcluster-echo", "cat", "/etc/passwd")
		Expect(err).NotTo(HaveOccurred(), out)
		Expect(out).To(ContainSubstring("nonroot:x:65532"))
		Expect(os.ReadFile("/etc/passwd")).NotTo(ContainSubstring("nonroot:x:65532"), "the host has the image's user: exec proves nothing")
		out, err = c.kubectl(ctx, "exec", "echo", "--", "devcluster-echo", "write", "/tmp/x", "y")
		Expect(err).NotTo(HaveOccurred(), out)
	})

	It("routes a Service's ClusterIP to its pod with kube-proxy's iptables rules, from inside another pod", func(ctx SpecContext) {
		svc := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: "echo"},
			Spec: corev1.ServiceSpec{
				Selector: map[string]string{"app": "echo"},
				Ports:    []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}},
			},
		}
		svc, err := c.client.CoreV1().Services("default").Create(ctx, svc, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(netip.MustParsePrefix(serviceCIDR).Contains(netip.MustParseAddr(svc.Spec.ClusterIP))).To(BeTrue())
		client := echoPod("client", nil)
		client.Labels = nil
		_, err = c.client.CoreV1().Pods("default").Create(ctx, client, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		Eventually(podPhase(ctx, c, "client")).WithTimeout(time.Minute).Should(Equal(corev1.PodRunning))
		Eventually(func(g Gomega) {
			out, err := c.kubectl(ctx, "exec", "client", "--", "devcluster-echo", "get", "http://"+svc.Spec.ClusterIP+"/")
			g.Expect(err).NotTo(HaveOccurred(), out)
			g.Expect(out).To(ContainSubstring(`"host":"echo"`))
		}).WithContext(ctx).WithTimeout(time.Minute).Should(Succeed())
	})

	It("resolves a Service's name with CoreDNS from inside a pod", func(ctx SpecContext) {
		Eventually(func(g Gomega) {
			out, err := c.kubectl(ctx, "exec", "client", "--", "devcluster-echo", "get", "http://echo.default.svc.cluster.local/")
			g.Expect(err).NotTo(HaveOccurred(), out)
			g.Expect(out).To(ContainSubstring(`"host":"echo"`))
		}).WithContext(ctx).WithTimeout(2 * time.Minute).Should(Succeed())
		out, err := c.kubectl(ctx, "exec", "client", "--", "devcluster-echo", "cat", "/etc/resolv.conf")
		Expect(err).NotTo(HaveOccurred(), out)
		Expect(out).To(ContainSubstring("nameserver " + dnsIP))

		By("a name written into D/dns-records, as on the process node")
		out, err = c.kubectl(ctx, "exec", "client", "--", "devcluster-echo", "lookup", "app.e2e.test")
		Expect(err).To(HaveOccurred(), "app.e2e.test resolved before it was written: %s", out)
		records := filepath.Join(c.dir, "dns-records")
		Expect(os.WriteFile(records, []byte("192.0.2.7 app.e2e.test\n"), 0o644)).To(Succeed())
		DeferCleanup(func() { _ = os.Remove(records) })
		Eventually(func() (string, error) {
			return c.kubectl(ctx, "exec", "client", "--", "devcluster-echo", "lookup", "app.e2e.test")
		}).WithContext(ctx).WithTimeout(time.Minute).WithPolling(time.Second).Should(Equal("192.0.2.7\n"))
	})

	It("runs a pod of the restricted Pod Security Standard, with its seccomp profile in force", func(ctx SpecContext) {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "restricted", Labels: map[string]string{
			"pod-security.kubernetes.io/enforce": "restricted"}}}
		_, err := c.client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		Eventually(func() error {
			_, err := c.client.CoreV1().ServiceAccounts("restricted").Get(ctx, "default", metav1.GetOptions{})
			return err
		}).WithContext(ctx).WithTimeout(30 * time.Second).Should(Succeed())
		_, err = c.client.CoreV1().Pods("restricted").Create(ctx, echoPod("loose", nil), metav1.CreateOptions{})
		Expect(err).To(MatchError(ContainSubstring("violates PodSecurity")))

		pod := echoPod("strict", &corev1.SecurityContext{
			AllowPrivilegeEscalation: ptr.To(false),
			ReadOnlyRootFilesystem:   ptr.To(true),
			RunAsNonRoot:             ptr.To(true),
			Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
			SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
		})
		_, err = c.client.CoreV1().Pods("restricted").Create(ctx, pod, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		Eventually(func() (corev1.PodPhase, error) {
			p, err := c.client.CoreV1().Pods("restricted").Get(ctx, "strict", metav1.GetOptions{})
			if err != nil {
				return "", err
			}
			return p.Status.Phase, nil
		}).WithContext(ctx).WithTimeout(time.Minute).Should(Equal(corev1.PodRunning))
		out, err := c.kubectl(ctx, "exec", "-n", "restricted", "strict", "--", "devcluster-echo", "cat", "/proc/self/status")
		Expect(err).NotTo(HaveOccurred(), out)
		Expect(out).To(MatchRegexp(`(?m)^Seccomp:\s+2$`), "seccomp filter mode")
		Expect(out).To(MatchRegexp(`(?m)^NoNewPrivs:\s+1$`))
		Expect(out).To(MatchRegexp(`(?m)^CapEff:\s+0+$`), "no capabilities")
	})

	It("enforces a read-only root filesystem", func(ctx SpecContext) {
		// /tmp is the image's, world-writable, on the root filesystem.
		write := []string{"devcluster-echo", "write", "/tmp/probe", "x"}
		for _, p := range []*corev1.Pod{oneShotPod("writes-rw", write, false), oneShotPod("writes-ro", write, true)} {
			_, err := c.client.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{})
			Expect(err).NotTo(HaveOccurred())
		}
		By("the same write succeeds on a writable root filesystem")
		Eventually(podPhase(ctx, c, "writes-rw")).WithTimeout(time.Minute).Should(Equal(corev1.PodSucceeded))
		By("and fails on a read-only one")
		Eventually(podPhase(ctx, c, "writes-ro")).WithTimeout(time.Minute).Should(Equal(corev1.PodFailed))
		out, err := c.kubectl(ctx, "logs", "writes-ro")
		Expect(err).NotTo(HaveOccurred(), out)
		Expect(out).To(ContainSubstring("read-only file system"))
	})

	It("hands out tailnet URLs a pod reaches: control server, API and ACME directory on the bridge address", func(ctx SpecContext) {
		env, err := os.ReadFile(filepath.Join(c.dir, "tailnet.env"))
		Expect(err).NotTo(HaveOccurred())
		vars := map[string]string{}
		for line := range strings.Lines(string(env)) {
			if k, v, ok := strings.Cut(strings.TrimSpace(line), "="); ok && !strings.HasPrefix(k, "#") {
				vars[k] = v
			}
		}
		for _, k := range []string{"TS_CONTROL_URL", "TS_API_URL"} {
			Expect(vars[k]).To(HavePrefix("http://"+nodeIP+":"), k)
		}
		// Pebble speaks HTTPS only; pods trust it through their service
		// account's CA bundle, to which devcluster adds its CA.
		Expect(vars["TS_DEBUG_ACME_DIRECTORY_URL"]).To(HavePrefix("https://"+nodeIP+":"), "TS_DEBUG_ACME_DIRECTORY_URL")
		// From inside the client pod (the previous specs' echo pod): the
		// control server's public keys.
		for _, u := range []string{vars["TS_CONTROL_URL"] + "/key?v=100"} {
			out, err := c.kubectl(ctx, "exec", "client", "--", "devcluster-echo", "get", u)
			Expect(err).NotTo(HaveOccurred(), "GET %s from a pod: %s", u, out)
			Expect(out).To(HavePrefix("{"), u)
		}
	})

	It("down stops everything: no node process, container, mount, cgroup, Service rule or bridge is left", func(ctx SpecContext) {
		out, err := exec.CommandContext(ctx, c.bin, "down", "--dir", c.dir).CombinedOutput()
		Expect(err).NotTo(HaveOccurred(), string(out))
		Eventually(c.exited).WithTimeout(time.Minute).Should(BeClosed())

		mountinfo, err := os.ReadFile("/proc/self/mountinfo")
		Expect(err).NotTo(HaveOccurred())
		Expect(string(mountinfo)).NotTo(ContainSubstring(c.dir+"/"), "mounts left under the cluster folder")
		Expect(processesNaming(c.dir)).To(BeEmpty())
		rules, err := exec.CommandContext(ctx, "iptables-save").CombinedOutput()
		Expect(err).NotTo(HaveOccurred(), string(rules))
		Expect(string(rules)).NotTo(ContainSubstring("KUBE-"), "kube-proxy's or the kubelet's iptables rules are left")
		Expect("/sys/fs/cgroup/memory/kubepods").NotTo(BeADirectory())
		_, err = os.Stat("/sys/class/net/" + bridge)
		Expect(os.IsNotExist(err)).To(BeTrue(), "bridge %s is left", bridge)
	})
})

func echoPod(name string, sc *corev1.SecurityContext) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": name}},
		Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: ptr.To[int64](2),
			Containers: []corev1.Container{{
				Name: "echo", Image: echoImage, ImagePullPolicy: corev1.PullIfNotPresent,
				Env: []corev1.EnvVar{{Name: "POD_IP", ValueFrom: &corev1.EnvVarSource{
					FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}}}},
				SecurityContext: sc,
			}},
		},
	}
}

func oneShotPod(name string, command []string, readOnly bool) *corev1.Pod {
	p := echoPod(name, &corev1.SecurityContext{ReadOnlyRootFilesystem: ptr.To(readOnly)})
	p.Spec.RestartPolicy = corev1.RestartPolicyNever
	p.Spec.Containers[0].Command = command
	return p
}

func podPhase(ctx context.Context, c *cluster, name string) func() (corev1.PodPhase, error) {
	return func() (corev1.PodPhase, error) {
		p, err := c.client.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return "", err
		}
		return p.Status.Phase, nil
	}
}

// processesNaming lists the processes whose command line names a file under
// dir (containerd, its shims, the kubelet).
func processesNaming(dir string) []string {
	var out []string
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil || len(b) == 0 {
			continue
		}
		cmdline := strings.ReplaceAll(string(b), "\x00", " ")
		if strings.Contains(cmdline, dir+"/") {
			out = append(out, fmt.Sprintf("%s: %s", e.Name(), cmdline))
		}
	}
	return out
}
