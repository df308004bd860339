package smoke

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	osexec "os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

const echoImage = "ghcr.io/tailplane/echo:dev"

func echoDeployment(ns string) *appsv1.Deployment {
	labels := map[string]string{"app": "echo"}
	replicas := int32(2)
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "echo", Namespace: ns},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name:  "echo",
					Image: echoImage,
					Env: []corev1.EnvVar{{Name: "POD_IP", ValueFrom: &corev1.EnvVarSource{
						FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}}}},
					Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}},
					ReadinessProbe: &corev1.Probe{PeriodSeconds: 2, ProbeHandler: corev1.ProbeHandler{
						HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromString("http")}}},
					LivenessProbe: &corev1.Probe{PeriodSeconds: 5, ProbeHandler: corev1.ProbeHandler{
						TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(8080)}}},
				}}},
			},
		},
	}
}

func echoService(ns string) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "echo", Namespace: ns},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": "echo"},
			Ports: []corev1.ServicePort{
				{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080), Protocol: corev1.ProtocolTCP},
				{Name: "udp", Port: 80, TargetPort: intstr.FromInt32(8080), Protocol: corev1.ProtocolUDP},
			},
		},
	}
}

func httpGet(ctx context.Context, url string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	c := &http.Client{Timeout: 5 * time.Second}
	resp, err := c.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return string(b), fmt.Errorf("%s: %s", url, resp.Status)
	}
	return string(b), err
}

var _ = Describe("devcluster", Ordered, func() {
	const ns = "smoke"
	var clusterIP string

	BeforeAll(func(ctx SpecContext) {
		c := suiteCluster.client
		_, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		Eventually(func() error {
			_, err := c.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{})
			return err
		}).WithTimeout(2 * time.Minute).Should(Succeed())
	})

	It("runs an echo Deployment and Service to Ready", func(ctx SpecContext) {
		c := suiteCluster.client
		_, err := c.AppsV1().Deployments(ns).Create(ctx, echoDeployment(ns), metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		svc, err := c.CoreV1().Services(ns).Create(ctx, echoService(ns), metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		clusterIP = svc.Spec.ClusterIP
		Expect(clusterIP).To(HavePrefix("127.96."))
		Eventually(func(g Gomega) {
			d, err := c.AppsV1().Deployments(ns).Get(ctx, "echo", metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(d.Status.ReadyReplicas).To(Equal(int32(2)))
		}).WithTimeout(60 * time.Second).WithPolling(250 * time.Millisecond).Should(Succeed())
		pods, err := c.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=echo"})
		Expect(err).NotTo(HaveOccurred())
		for _, p := range pods.Items {
			Expect(p.Status.Phase).To(Equal(corev1.PodRunning))
			Expect(p.Status.PodIP).To(HavePrefix("198.18."))
			Expect(p.Status.ContainerStatuses).To(HaveLen(1))
			Expect(p.Status.ContainerStatuses[0].Ready).To(BeTrue())
		}
	}, SpecTimeout(90*time.Second))

	It("answers on the Service's ClusterIP over TCP and UDP", func(ctx SpecContext) {
		Eventually(func(g Gomega) {
			body, err := httpGet(ctx, "http://"+clusterIP+"/hello")
			g.Expect(err).NotTo(HaveOccurred())
			var got struct{ Pod, PodIP, Path string }
			g.Expect(json.Unmarshal([]byte(body), &got)).To(Succeed())
			g.Expect(got.Path).To(Equal("/hello"))
			g.Expect(got.Pod).To(HavePrefix("echo-"))
			g.Expect(got.PodIP).To(HavePrefix("198.18."))
		}).WithTimeout(2 * time.Minute).Should(Succeed())
		Eventually(func(g Gomega) {
			conn, err := net.Dial("udp", net.JoinHostPort(clusterIP, "80"))
			g.Expect(err).NotTo(HaveOccurred())
			defer conn.Close()
			_ = conn.SetDeadline(time.Now().Add(2 * time.Second))
			_, err = conn.Write([]byte("ping"))
			g.Expect(err).NotTo(HaveOccurred())
			buf := make([]byte, 100)
			n, err := conn.Read(buf)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(string(buf[:n])).To(Equal("echo: ping"))
		}).WithTimeout(2 * time.Minute).Should(Succeed())
	}, SpecTimeout(90*time.Second))

	It("gives the pod its service-account token at the standard path", func(ctx SpecContext) {
		const dir = "/var/run/secrets/kubernetes.io/serviceaccount/"
		var token string
		Eventually(func(g Gomega) {
			var err error
			token, err = httpGet(ctx, "http://"+clusterIP+"/file?path="+dir+"token")
			g.Expect(err).NotTo(HaveOccurred())
		}).WithTimeout(20 * time.Second).Should(Succeed())
		review, err := suiteCluster.client.AuthenticationV1().TokenReviews().Create(ctx,
			&authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(review.Status.Authenticated).To(BeTrue(), review.Status.Error)
		Expect(review.Status.User.Username).To(Equal("system:serviceaccount:" + ns + ":default"))

		namespace, err := httpGet(ctx, "http://"+clusterIP+"/file?path="+dir+"namespace")
		Expect(err).NotTo(HaveOccurred())
		Expect(namespace).To(Equal(ns))
		caCert, err := httpGet(ctx, "http://"+clusterIP+"/file?path="+dir+"ca.crt")
		Expect(err).NotTo(HaveOccurred())
		Expect(caCert).To(ContainSubstring("BEGIN CERTIFICATE"))
		// The bundle holds devcluster's local CA (the ACME server's) too,
		// and tailnet.env names it for pods: a pod that mounts over the
		// host folder of D/acme-ca.pem (an emptyDir on /tmp) still trusts
		// the ACME server.
		localCA, err := os.ReadFile(filepath.Join(suiteCluster.dir, "acme-ca.pem"))
		Expect(err).NotTo(HaveOccurred())
		Expect(caCert).To(ContainSubstring(strings.TrimSpace(string(localCA))), "devcluster's local CA in the pod's ca.crt")
		Expect(suiteCluster.env).To(HaveKeyWithValue("TS_POD_ACME_CA_FILE", dir+"ca.crt"))
		// The host does not see the pod's mounts.
		_, err = os.Stat(dir + "token")
		Expect(os.IsNotExist(err)).To(BeTrue(), "the token must exist only inside the pod's mount namespace")
	}, SpecTimeout(60*time.Second))

	It("gives pods the cluster DNS (ClusterFirst): Service names, D/dns-records names, the host's resolv.conf untouched", func(ctx SpecContext) {
		var resolv string
		Eventually(func(g Gomega) {
			var err error
			resolv, err = httpGet(ctx, "http://"+clusterIP+"/file?path=/etc/resolv.conf")
			g.Expect(err).NotTo(HaveOccurred())
		}).WithTimeout(20 * time.Second).Should(Succeed())
		Expect(resolv).To(MatchRegexp(`(?m)^nameserver 198\.18\.\d+\.1$`))
		Expect(resolv).To(ContainSubstring("search " + ns + ".svc.cluster.local svc.cluster.local cluster.local"))
		Expect(resolv).To(ContainSubstring("options ndots:5"))
		host, err := os.ReadFile("/etc/resolv.conf")
		Expect(err).NotTo(HaveOccurred())
		Expect(string(host)).NotTo(ContainSubstring("198.18."), "the host's resolv.conf")

		// As the pod resolves names: its Service by the short name (the
		// search path) and the full one; a name of the records file once
		// it is written; an unknown name in the cluster domain fails.
		for _, name := range []string{"echo", "echo." + ns + ".svc.cluster.local"} {
			Expect(httpGet(ctx, "http://"+clusterIP+"/lookup?name="+name)).To(Equal(clusterIP), name)
		}
		_, err = httpGet(ctx, "http://"+clusterIP+"/lookup?name=missing."+ns+".svc.cluster.local")
		Expect(err).To(HaveOccurred())
		records := filepath.Join(suiteCluster.dir, "dns-records")
		Expect(os.WriteFile(records, []byte("192.0.2.9 app.smoke.test\n"), 0o644)).To(Succeed())
		DeferCleanup(func() { _ = os.Remove(records) })
		Expect(httpGet(ctx, "http://"+clusterIP+"/lookup?name=app.smoke.test")).To(Equal("192.0.2.9"))
	}, SpecTimeout(60*time.Second))

	It("reports a clear reason for an image it does not know, and nothing else is affected", func(ctx SpecContext) {
		c := suiteCluster.client
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "unknown-image", Namespace: ns},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "example.com/not/in/the/map:1"}}},
		}
		_, err := c.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		Eventually(func(g Gomega) {
			p, err := c.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(p.Status.ContainerStatuses).To(HaveLen(1))
			w := p.Status.ContainerStatuses[0].State.Waiting
			g.Expect(w).NotTo(BeNil())
			g.Expect(w.Reason).To(Equal("ErrImageNotKnown"))
			g.Expect(w.Message).To(ContainSubstring(`"example.com/not/in/the/map:1" is not in devcluster's image map`))
			g.Expect(w.Message).To(ContainSubstring("*tailplane/echo*="))
			g.Expect(p.Status.Phase).To(Equal(corev1.PodPending))
		}).WithTimeout(2 * time.Minute).Should(Succeed())
		d, err := c.AppsV1().Deployments(ns).Get(ctx, "echo", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(d.Status.ReadyReplicas).To(Equal(int32(2)))
		Expect(c.CoreV1().Pods(ns).Delete(ctx, pod.Name, metav1.DeleteOptions{})).To(Succeed())
	}, SpecTimeout(60*time.Second))

	podSpecs(ns)
	tailnetSpecs()
	joinSpecs()

	It("stops with down, leaving no process, mount, route or listener, and resumes with up", func(ctx SpecContext) {
		c := suiteCluster
		pods, err := c.client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=echo"})
		Expect(err).NotTo(HaveOccurred())
		var podIPs []string
		for _, p := range pods.Items {
			podIPs = append(podIPs, p.Status.PodIP)
		}
		apiHost := strings.TrimPrefix(c.config.Host, "https://")
		upPID := c.cmd.Process.Pid
		groups, _ := os.ReadDir(c.dir + "/run/pgids")
		Expect(groups).NotTo(BeEmpty(), "the node records the pods' process groups")

		By("letting in a node whose state survives the restart, with a certificate")
		stateDir := GinkgoT().TempDir()
		survivor := persistentNode("survivor", mintKey(ctx, apiClient(), false), stateDir)
		st, err := survivor.Up(ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(st.TailscaleIPs).NotTo(BeEmpty())
		survivorIP := st.TailscaleIPs[0].String()
		certPEM := survivorCert(ctx, survivor)
		Expect(verifyWithTailnetCA(certPEM)).To(Succeed())
		Expect(survivor.Close()).To(Succeed())

		onPodsOrService := func(ip net.IP) bool {
			return ip.Equal(net.ParseIP(clusterIP)) || slices.Contains(podIPs, ip.String())
		}
		Expect(boundSockets(onPodsOrService)).NotTo(BeEmpty(), "while up, the service proxy and pods hold sockets")
		podCIDR, err := os.ReadFile(c.dir + "/pod-cidr")
		Expect(err).NotTo(HaveOccurred())
		routes, err := osexec.Command("ip", "route", "show", "table", "local").Output()
		Expect(err).NotTo(HaveOccurred())
		Expect(string(routes)).To(ContainSubstring(string(podCIDR)), "while up, the pod subnet is local")

		c.down()

		Expect(processAlive(upPID)).To(BeFalse())
		for _, g := range groups {
			pgid, _ := strconv.Atoi(g.Name())
			Expect(processAlive(pgid)).To(BeFalse(), "pod process %d survived down", pgid)
		}
		mounts, err := os.ReadFile("/proc/mounts")
		Expect(err).NotTo(HaveOccurred())
		Expect(string(mounts)).NotTo(ContainSubstring(c.dir))
		routes, err = osexec.Command("ip", "route", "show", "table", "local").Output()
		Expect(err).NotTo(HaveOccurred())
		Expect(string(routes)).NotTo(ContainSubstring(string(podCIDR)))
		// Dialing is no proof for pod IPs: without the pod route, packets to
		// 198.18.x.y leave the machine. Read the kernel's socket tables.
		for _, addr := range []string{apiHost, net.JoinHostPort(clusterIP, "80")} {
			conn, err := net.DialTimeout("tcp", addr, time.Second)
			if err == nil {
				conn.Close()
			}
			Expect(err).To(HaveOccurred(), "%s still accepts connections after down", addr)
		}
		Expect(boundSockets(onPodsOrService)).To(BeEmpty(), "sockets on the ClusterIP or pod IPs after down")

		By("resuming on the same folder")
		c.up(ctx)
		Eventually(func(g Gomega) {
			d, err := c.client.AppsV1().Deployments(ns).Get(ctx, "echo", metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(d.Status.ReadyReplicas).To(Equal(int32(2)))
			body, err := httpGet(ctx, "http://"+clusterIP+"/again")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(body).To(ContainSubstring(`"path":"/again"`))
		}).WithTimeout(60 * time.Second).WithPolling(250 * time.Millisecond).Should(Succeed())

		By("letting the node with saved state back in without a new auth key")
		again := persistentNode("survivor", "", stateDir)
		upCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		_, err = again.Up(upCtx)
		Expect(err).NotTo(HaveOccurred())
		// Up can report Running from the saved state before control has
		// registered the node again; the device list is what proves it:
		// one device, with the IP it had before.
		Eventually(func(g Gomega) {
			devices, err := apiClient().Devices().List(ctx)
			g.Expect(err).NotTo(HaveOccurred())
			var addrs [][]string
			for _, d := range devices {
				if d.Hostname == "survivor" {
					addrs = append(addrs, d.Addresses)
				}
			}
			g.Expect(addrs).To(ConsistOf(ContainElement(survivorIP)))
		}).WithTimeout(2 * time.Minute).WithPolling(200 * time.Millisecond).Should(Succeed())

		By("verifying the certificate issued before the restart with the CA published after it")
		Expect(verifyWithTailnetCA(certPEM)).To(Succeed())
	}, SpecTimeout(3*time.Minute))
})

// boundSockets lists TCP listeners and UDP sockets (IPv4) whose local
// address matches, from /proc/net/{tcp,udp}.
func boundSockets(match func(net.IP) bool) []string {
	GinkgoHelper()
	var out []string
	for _, table := range []string{"tcp", "udp"} {
		b, err := os.ReadFile("/proc/net/" + table)
		Expect(err).NotTo(HaveOccurred())
		for _, line := range strings.Split(string(b), "\n")[1:] {
			f := strings.Fields(line)
			if len(f) < 4 || (table == "tcp" && f[3] != "0A") {
				continue
			}
			hexIP, hexPort, _ := strings.Cut(f[1], ":")
			v, err := strconv.ParseUint(hexIP, 16, 32)
			if err != nil {
				continue
			}
			ip := net.IPv4(byte(v), byte(v>>8), byte(v>>16), byte(v>>24))
			if match(ip) {
				port, _ := strconv.ParseUint(hexPort, 16, 16)
				out = append(out, fmt.Sprintf("%s %s:%d", table, ip, port))
			}
		}
	}
	return out
}

// groupMembers lists the live processes whose process group is pgid.
func groupMembers(pgid int) []int {
	var out []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// Fields after the command name: state ppid pgrp ...
		s := string(b)
		f := strings.Fields(s[strings.LastIndex(s, ")")+1:])
		if len(f) > 2 && f[0] != "Z" && f[2] == strconv.Itoa(pgid) {
			out = append(out, pid)
		}
	}
	return out
}
