package smoke

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// The controllers devcluster runs (internal/controllers) beyond the
// Deployment the cluster spec covers: each does its one job.
var _ = Describe("devcluster's controllers", Ordered, func() {
	const ns = "smoke-controllers"

	BeforeAll(func(ctx SpecContext) {
		c := suiteCluster.client
		_, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
	})

	It("publish the default ServiceAccount, kube-root-ca.crt and a legacy token Secret's data", func(ctx SpecContext) {
		c := suiteCluster.client
		Eventually(func(g Gomega) {
			_, err := c.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			cm, err := c.CoreV1().ConfigMaps(ns).Get(ctx, "kube-root-ca.crt", metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(cm.Data["ca.crt"]).To(ContainSubstring("BEGIN CERTIFICATE"))
		}).WithTimeout(time.Minute).Should(Succeed())
		_, err := c.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: "legacy-token", Annotations: map[string]string{corev1.ServiceAccountNameKey: "default"}},
			Type:       corev1.SecretTypeServiceAccountToken,
		}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		Eventually(func(g Gomega) {
			s, err := c.CoreV1().Secrets(ns).Get(ctx, "legacy-token", metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(s.Data).To(HaveKey(corev1.ServiceAccountTokenKey))
			g.Expect(s.Data).To(HaveKey(corev1.ServiceAccountRootCAKey))
		}).WithTimeout(time.Minute).Should(Succeed())
	}, SpecTimeout(3*time.Minute))

	It("run a Job to completion and a StatefulSet's pod by its ordinal name", func(ctx SpecContext) {
		c := suiteCluster.client
		pod := corev1.PodSpec{Containers: []corev1.Container{{Name: "echo", Image: echoImage}}}
		job := &batchv1.Job{
			ObjectMeta: metav1.ObjectMeta{Name: "once"},
			Spec: batchv1.JobSpec{BackoffLimit: ptr.To[int32](0), Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyNever,
				Containers:    []corev1.Container{{Name: "true", Image: echoImage, Command: []string{"/bin/true"}}},
			}}},
		}
		_, err := c.BatchV1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		labels := map[string]string{"app": "set"}
		set := &appsv1.StatefulSet{
			ObjectMeta: metav1.ObjectMeta{Name: "set"},
			Spec: appsv1.StatefulSetSpec{
				Replicas: ptr.To[int32](1), Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: pod},
			},
		}
		_, err = c.AppsV1().StatefulSets(ns).Create(ctx, set, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		Eventually(func(g Gomega) {
			_, err := c.CoreV1().Pods(ns).Get(ctx, "set-0", metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			j, err := c.BatchV1().Jobs(ns).Get(ctx, "once", metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(j.Status.Succeeded+j.Status.Failed).To(BeNumerically(">=", 1), "the Job's pod ran")
		}).WithTimeout(2 * time.Minute).Should(Succeed())
	}, SpecTimeout(3*time.Minute))

	It("bind a pod whose nodeSelector the node matches, and leave one it does not match Pending, as kube-scheduler says", func(ctx SpecContext) {
		c := suiteCluster.client
		for name, sel := range map[string]map[string]string{
			"fits":     {"kubernetes.io/os": "linux"},
			"no-match": {"bench.tailplane.dev/no-such-node": "true"},
		} {
			_, err := c.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name},
				Spec: corev1.PodSpec{NodeSelector: sel, Containers: []corev1.Container{{Name: "echo", Image: echoImage}}}}, metav1.CreateOptions{})
			Expect(err).NotTo(HaveOccurred())
		}
		Eventually(func(g Gomega) {
			fits, err := c.CoreV1().Pods(ns).Get(ctx, "fits", metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(fits.Spec.NodeName).NotTo(BeEmpty())
			pending, err := c.CoreV1().Pods(ns).Get(ctx, "no-match", metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(pending.Spec.NodeName).To(BeEmpty())
			g.Expect(pending.Status.Conditions).To(ContainElement(SatisfyAll(
				HaveField("Type", corev1.PodScheduled), HaveField("Status", corev1.ConditionFalse),
				HaveField("Reason", corev1.PodReasonUnschedulable),
				HaveField("Message", "0/1 nodes are available: 1 node(s) didn't match Pod's node affinity/selector.")),
			))
		}).WithTimeout(time.Minute).Should(Succeed())
	}, SpecTimeout(2*time.Minute))

	It("collect an owner's dependents and finish deleting the namespace", func(ctx SpecContext) {
		c := suiteCluster.client
		owner, err := c.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "owner"}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		_, err = c.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "dependent",
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name, UID: owner.UID}}}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(c.CoreV1().ConfigMaps(ns).Delete(ctx, "owner", metav1.DeleteOptions{})).To(Succeed())
		Eventually(func() bool {
			_, err := c.CoreV1().ConfigMaps(ns).Get(ctx, "dependent", metav1.GetOptions{})
			return apierrors.IsNotFound(err)
		}).WithTimeout(2*time.Minute).Should(BeTrue(), "the garbage collector deletes the dependent")

		Expect(c.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})).To(Succeed())
		Eventually(func() bool {
			_, err := c.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
			return apierrors.IsNotFound(err)
		}).WithTimeout(2*time.Minute).Should(BeTrue(), "the namespace controller empties and removes the namespace")
	}, SpecTimeout(5*time.Minute))
})
