package realnode

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

const (
	// DNSIP is the cluster DNS Service's address (the kubelet's clusterDNS).
	DNSIP = "198.19.128.10"
	// CoreDNSImage is CoreDNS built from kind-e2e/tools/coredns.
	CoreDNSImage = "devcluster.local/coredns:v1.15.0"
)

// corefile serves cluster.local from the API and the names of devcluster's
// records file (D/dns-records, mirrored into recordsConfigMap by
// syncRecords and re-read by the hosts plugin), and nothing else: the machine
// has no upstream resolver a pod may use (the host's resolver is not
// reachable from the pod range), so other names fail fast instead of
// timing out. Like k3s's, it imports the server blocks (*.server) of the
// optional ConfigMap coredns-custom, which `up` never touches: stub domains
// such as ts.net for the operator's DNSConfig nameserver go there and
// survive a restart that applies this Corefile again.
const corefile = `import /etc/coredns/custom/*.server
.:53 {
    errors
    health :8080
    ready :8181
    hosts /etc/coredns/records/hosts {
        ttl 5
        reload 2s
        fallthrough
    }
    kubernetes cluster.local in-addr.arpa ip6.arpa {
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
        ttl 30
    }
    cache 30
    reload
    loadbalance
}
`

// applyCoreDNS creates or updates CoreDNS in kube-system as kind's is: a
// ServiceAccount allowed to read Services, EndpointSlices, Pods and
// Namespaces, the Corefile, a Deployment and the kube-dns Service on DNSIP.
// Its pod runs as the image's non-root user with a read-only root
// filesystem, no capabilities (binding :53 works as the pod's sandbox allows
// unprivileged ports) and the RuntimeDefault seccomp profile.
func applyCoreDNS(ctx context.Context, client kubernetes.Interface) error {
	const ns, name = "kube-system", "coredns"
	// CustomConfigMap is the ConfigMap of extra server blocks.
	const custom = "coredns-custom"
	labels := map[string]string{"k8s-app": "kube-dns"}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "system:coredns"},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"services", "pods", "namespaces"}, Verbs: []string{"list", "watch"}},
			{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: []string{"list", "watch"}},
		},
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "system:coredns"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "system:coredns"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: name, Namespace: ns}},
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Data: map[string]string{"Corefile": corefile}}
	deploy := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					ServiceAccountName: name,
					DNSPolicy:          corev1.DNSDefault,
					PriorityClassName:  "system-cluster-critical",
					SecurityContext: &corev1.PodSecurityContext{
						RunAsNonRoot:   ptr.To(true),
						SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
					},
					Containers: []corev1.Container{{
						Name: name, Image: CoreDNSImage, ImagePullPolicy: corev1.PullIfNotPresent,
						Args: []string{"-conf", "/etc/coredns/Corefile"},
						Ports: []corev1.ContainerPort{
							{Name: "dns", ContainerPort: 53, Protocol: corev1.ProtocolUDP},
							{Name: "dns-tcp", ContainerPort: 53, Protocol: corev1.ProtocolTCP},
						},
						VolumeMounts: []corev1.VolumeMount{
							{Name: "config", MountPath: "/etc/coredns", ReadOnly: true},
							{Name: "custom", MountPath: "/etc/coredns/custom", ReadOnly: true},
							{Name: "records", MountPath: "/etc/coredns/records", ReadOnly: true},
						},
						ReadinessProbe: &corev1.Probe{
							ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/ready", Port: intstr.FromInt32(8181)}},
							PeriodSeconds: 2,
						},
						SecurityContext: &corev1.SecurityContext{
							AllowPrivilegeEscalation: ptr.To(false),
							ReadOnlyRootFilesystem:   ptr.To(true),
							Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
						},
					}},
					Volumes: []corev1.Volume{
						{Name: "config", VolumeSource: corev1.VolumeSource{
							ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: name}},
						}},
						{Name: "custom", VolumeSource: corev1.VolumeSource{
							ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: custom}, Optional: ptr.To(true)},
						}},
						{Name: "records", VolumeSource: corev1.VolumeSource{
							ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: recordsConfigMap}, Optional: ptr.To(true)},
						}},
					},
				},
			},
		},
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "kube-dns", Namespace: ns, Labels: labels},
		Spec: corev1.ServiceSpec{
			ClusterIP: DNSIP, Selector: labels,
			Ports: []corev1.ServicePort{
				{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP, TargetPort: intstr.FromInt32(53)},
				{Name: "dns-tcp", Port: 53, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(53)},
			},
		},
	}
	steps := []struct {
		what   string
		create func() error
		update func() error
	}{
		{"service account", func() error {
			_, err := client.CoreV1().ServiceAccounts(ns).Create(ctx, sa, metav1.CreateOptions{})
			return err
		}, nil},
		{"cluster role", func() error {
			_, err := client.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{})
			return err
		},
			func() error {
				cur, err := client.RbacV1().ClusterRoles().Get(ctx, role.Name, metav1.GetOptions{})
				if err != nil {
					return err
				}
				role.ResourceVersion = cur.ResourceVersion
				_, err = client.RbacV1().ClusterRoles().Update(ctx, role, metav1.UpdateOptions{})
				return err
			}},
		{"cluster role binding", func() error {
			_, err := client.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{})
			return err
		}, nil},
		{"Corefile", func() error {
			_, err := client.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{})
			return err
		},
			func() error {
				cur, err := client.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
				if err != nil {
					return err
				}
				cm.ResourceVersion = cur.ResourceVersion
				_, err = client.CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{})
				return err
			}},
		{"deployment", func() error {
			_, err := client.AppsV1().Deployments(ns).Create(ctx, deploy, metav1.CreateOptions{})
			return err
		},
			func() error {
				cur, err := client.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
				if err != nil {
					return err
				}
				deploy.ResourceVersion = cur.ResourceVersion
				_, err = client.AppsV1().Deployments(ns).Update(ctx, deploy, metav1.UpdateOptions{})
				return err
			}},
		// A Service that exists already is kept: creating it again fails on
		// its ClusterIP (allocated) before the name is checked.
		{"service", func() error {
			_, err := client.CoreV1().Services(ns).Get(ctx, svc.Name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				_, err = client.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{})
			}
			return err
		}, nil},
	}
	for _, s := range steps {
		err := s.create()
		if apierrors.IsAlreadyExists(err) && s.update != nil {
			err = s.update()
		} else if apierrors.IsAlreadyExists(err) {
			err = nil
		}
		if err != nil {
			return fmt.Errorf("CoreDNS %s: %w", s.what, err)
		}
	}
	return nil
}
