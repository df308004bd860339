package smoke

import (
	"encoding/json"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// podSpecs check what the process node does with a pod spec; they run in
// the suite's ordered container, in namespace ns.
func podSpecs(ns string) {
	It("resolves env (valueFrom), $(VAR) args, volumes at their mountPaths and exec probes", func(ctx SpecContext) {
		c := suiteCluster.client
		_, err := c.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "creds"},
			StringData: map[string]string{"password": "s3cret"}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		_, err = c.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "settings"},
			Data: map[string]string{"mode": "fast", "file.txt": "hello from a configmap"}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "features", Labels: map[string]string{"tier": "smoke"}},
			Spec: corev1.PodSpec{
				Containers: []corev1.Container{{
					Name: "echo", Image: echoImage, Args: []string{"--mode=$(MODE)"},
					Env: []corev1.EnvVar{
						{Name: "POD_IP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}}},
						{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
						{Name: "MODE", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{
							LocalObjectReference: corev1.LocalObjectReference{Name: "settings"}, Key: "mode"}}},
						{Name: "PASSWORD", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
							LocalObjectReference: corev1.LocalObjectReference{Name: "creds"}, Key: "password"}}},
					},
					VolumeMounts: []corev1.VolumeMount{
						{Name: "creds", MountPath: "/etc/smoke/creds", ReadOnly: true},
						{Name: "settings", MountPath: "/etc/smoke/settings"},
						{Name: "podinfo", MountPath: "/etc/smoke/podinfo"},
						{Name: "scratch", MountPath: "/etc/smoke/scratch"},
						// Over the folder that holds the node's files (and so
						// the other volumes' sources) when devcluster runs in /tmp.
						{Name: "tmp", MountPath: "/tmp"},
					},
					// An exec probe runs in the container's mount namespace:
					// the file exists only there.
					ReadinessProbe: &corev1.Probe{PeriodSeconds: 1, ProbeHandler: corev1.ProbeHandler{
						Exec: &corev1.ExecAction{Command: []string{"cat", "/etc/smoke/settings/mode"}}}},
				}},
				Volumes: []corev1.Volume{
					{Name: "creds", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "creds"}}},
					{Name: "settings", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
						LocalObjectReference: corev1.LocalObjectReference{Name: "settings"}}}},
					{Name: "podinfo", VolumeSource: corev1.VolumeSource{DownwardAPI: &corev1.DownwardAPIVolumeSource{
						Items: []corev1.DownwardAPIVolumeFile{{Path: "tier", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.labels['tier']"}}}}}},
					{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
					{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
				},
			},
		}
		_, err = c.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		var podIP string
		Eventually(func(g Gomega) {
			p, err := c.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(p.Status.ContainerStatuses).To(HaveLen(1))
			g.Expect(p.Status.ContainerStatuses[0].Ready).To(BeTrue())
			podIP = p.Status.PodIP
		}).WithTimeout(2 * time.Minute).WithPolling(200 * time.Millisecond).Should(Succeed())
		base := "http://" + podIP + ":8080"

		body, err := httpGet(ctx, base+"/env")
		Expect(err).NotTo(HaveOccurred())
		var env map[string]string
		Expect(json.Unmarshal([]byte(body), &env)).To(Succeed())
		Expect(env).To(HaveKeyWithValue("POD_IP", podIP))
		Expect(env).To(HaveKeyWithValue("POD_NAME", "features"))
		Expect(env).To(HaveKeyWithValue("MODE", "fast"))
		Expect(env).To(HaveKeyWithValue("PASSWORD", "s3cret"))
		apiURL := strings.TrimPrefix(suiteCluster.config.Host, "https://")
		Expect(env).To(HaveKeyWithValue("KUBERNETES_SERVICE_HOST", strings.Split(apiURL, ":")[0]))
		Expect(env).To(HaveKeyWithValue("KUBERNETES_SERVICE_PORT", strings.Split(apiURL, ":")[1]))

		body, err = httpGet(ctx, base+"/args")
		Expect(err).NotTo(HaveOccurred())
		Expect(body).To(ContainSubstring(`"--mode=fast"`))

		for path, want := range map[string]string{
			"/etc/smoke/creds/password":    "s3cret",
			"/etc/smoke/settings/file.txt": "hello from a configmap",
			"/etc/smoke/podinfo/tier":      "smoke",
			"/etc/smoke/settings/mode":     "fast",
		} {
			got, err := httpGet(ctx, base+"/file?path="+path)
			Expect(err).NotTo(HaveOccurred(), path)
			Expect(got).To(Equal(want), path)
		}
		// The node created the mountpoint folders on the host; they go with the pod.
		Expect("/etc/smoke").To(BeADirectory())
		Expect(c.CoreV1().Pods(ns).Delete(ctx, pod.Name, metav1.DeleteOptions{})).To(Succeed())
		Eventually(func() bool {
			_, err := os.Stat("/etc/smoke")
			return os.IsNotExist(err)
		}).WithTimeout(20*time.Second).Should(BeTrue(), "mountpoint folders left on the host")
	}, SpecTimeout(60*time.Second))

	It("restarts a failing container with back-off, records its last state, and serves its logs", func(ctx SpecContext) {
		c := suiteCluster.client
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "crasher"},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{
				Name: "main", Image: echoImage, Command: []string{"/bin/sh", "-c", "echo started once; exit 3"},
			}}},
		}
		_, err := c.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		Eventually(func(g Gomega) {
			p, err := c.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(p.Status.ContainerStatuses).To(HaveLen(1))
			s := p.Status.ContainerStatuses[0]
			g.Expect(s.RestartCount).To(BeNumerically(">=", 2))
			g.Expect(s.LastTerminationState.Terminated).NotTo(BeNil())
			g.Expect(s.LastTerminationState.Terminated.ExitCode).To(Equal(int32(3)))
			g.Expect(s.State.Waiting).NotTo(BeNil())
			g.Expect(s.State.Waiting.Reason).To(Equal("CrashLoopBackOff"))
		}).WithTimeout(2 * time.Minute).WithPolling(200 * time.Millisecond).Should(Succeed())

		By("kubectl logs, through the apiserver and the node's log endpoint")
		Eventually(func(g Gomega) {
			out, err := exec.Command(suiteCluster.bin, "kubectl", "--dir", suiteCluster.dir, "logs", "-n", ns, pod.Name).CombinedOutput()
			g.Expect(err).NotTo(HaveOccurred(), string(out))
			g.Expect(string(out)).To(ContainSubstring("started once"))
		}).WithTimeout(20 * time.Second).Should(Succeed())
		Expect(c.CoreV1().Pods(ns).Delete(ctx, pod.Name, metav1.DeleteOptions{})).To(Succeed())
	}, SpecTimeout(60*time.Second))

	It("restarts a container whose liveness probe fails", func(ctx SpecContext) {
		c := suiteCluster.client
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "unhealthy"},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{
				Name: "echo", Image: echoImage,
				Env: []corev1.EnvVar{{Name: "POD_IP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}}}},
				LivenessProbe: &corev1.Probe{PeriodSeconds: 1, FailureThreshold: 2, ProbeHandler: corev1.ProbeHandler{
					HTTPGet: &corev1.HTTPGetAction{Path: "/file?path=/no/such/file", Port: intstr.FromInt32(8080)}}},
			}}},
		}
		_, err := c.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		Eventually(func(g Gomega) {
			p, err := c.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(p.Status.ContainerStatuses).To(HaveLen(1))
			s := p.Status.ContainerStatuses[0]
			g.Expect(s.RestartCount).To(BeNumerically(">=", 1))
			g.Expect(s.LastTerminationState.Terminated).NotTo(BeNil())
			g.Expect(s.LastTerminationState.Terminated.Message).To(Equal("Liveness probe failed"))
		}).WithTimeout(2 * time.Minute).WithPolling(200 * time.Millisecond).Should(Succeed())
		Expect(c.CoreV1().Pods(ns).Delete(ctx, pod.Name, metav1.DeleteOptions{})).To(Succeed())
	}, SpecTimeout(60*time.Second))

	It("stops a pod within its grace period: SIGTERM, then SIGKILL for the whole process group", func(ctx SpecContext) {
		c := suiteCluster.client
		grace := int64(2)
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "stubborn"},
			Spec: corev1.PodSpec{
				TerminationGracePeriodSeconds: &grace,
				Containers: []corev1.Container{{
					Name: "main", Image: echoImage,
					// Ignores SIGTERM, and leaves a background child behind.
					Command: []string{"/bin/sh", "-c", "trap '' TERM; sleep 300 & wait"},
				}},
			},
		}
		_, err := c.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		var pid int
		Eventually(func(g Gomega) {
			p, err := c.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(p.Status.Phase).To(Equal(corev1.PodRunning))
			g.Expect(p.Status.ContainerStatuses[0].ContainerID).To(HavePrefix("process://"))
			pid, err = strconv.Atoi(strings.TrimPrefix(p.Status.ContainerStatuses[0].ContainerID, "process://"))
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(groupMembers(pid)).To(HaveLen(2), "sh and its background sleep")
		}).WithTimeout(2 * time.Minute).WithPolling(200 * time.Millisecond).Should(Succeed())

		start := time.Now()
		Expect(c.CoreV1().Pods(ns).Delete(ctx, pod.Name, metav1.DeleteOptions{})).To(Succeed())
		Eventually(func() bool {
			_, err := c.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
			return err != nil
		}).WithTimeout(20 * time.Second).WithPolling(100 * time.Millisecond).Should(BeTrue())
		Expect(time.Since(start)).To(BeNumerically(">=", 2*time.Second), "SIGTERM is ignored, so the pod lives out its grace period")
		Expect(groupMembers(pid)).To(BeEmpty(), "SIGKILL reached every process of the group")
	}, SpecTimeout(60*time.Second))
}
