// Package dnsconfig is the handler module of DNSConfig: it runs the
// in-cluster nameserver (internal/nameserver, served by `tailplane-proxy
// nameserver`) as a Deployment and Service in the operator namespace, and
// keeps its records ConfigMap (dnsrecords, records.json in the official
// format) current with the MagicDNS names of the proxies the operator runs,
// so that cluster workloads resolve them through a CoreDNS stub domain.
//
// This file and records.go are the pure part (objects and records from
// typed inputs); register.go applies them and imports runtime/ and
// handlers/lib/cluster as well.
package dnsconfig

import (
	"maps"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/tailplane/tailplane/crds/tailscale/v1alpha1"
	"github.com/tailplane/tailplane/handlers/lib/settings"
	"github.com/tailplane/tailplane/internal/nameserver"
	"github.com/tailplane/tailplane/internal/proxystate"
)

// The official names: the nameserver's Deployment, Service and
// ServiceAccount are all "nameserver".
const (
	Name = "nameserver"
	// ParentType is the parent-resource-type label of the objects.
	ParentType = "nameserver"
	// DefaultTag is the tag used when spec.nameserver.image names a
	// repository without a tag (the official default tag).
	DefaultTag = "stable"
	port       = 1053
)

// The NameserverReady reasons and messages of the official operator.
const (
	ReasonCreated         = "NameserverCreated"
	ReasonCreationFailed  = "NameserverCreationFailed"
	ReasonMultiple        = "MultipleDNSConfigsPresent"
	MessageMultiple       = "Multiple DNSConfig resources found in cluster. Please ensure no more than one is present."
	MessageCreationFailed = "Failed creating nameserver resources: %v"
)

// Labels are the official labels of the nameserver's objects.
func Labels(dc *v1alpha1.DNSConfig, namespace string) map[string]string {
	return map[string]string{
		proxystate.LabelManaged: "true", proxystate.LabelParentName: dc.Name, proxystate.LabelParentNamespace: namespace,
		proxystate.LabelParentType: ParentType,
		"app.kubernetes.io/name":   "tailscale", "app.kubernetes.io/component": "nameserver",
	}
}

// Image is the nameserver's image: the proxy image (which runs the
// nameserver as `tailplane-proxy nameserver`) unless spec.nameserver.image
// names another; a tag alone replaces the proxy image's tag.
func Image(dc *v1alpha1.DNSConfig, proxyImage string) string {
	img := dc.Spec.Nameserver.Image
	if img == nil || img.Repo == "" && img.Tag == "" {
		return proxyImage
	}
	if img.Repo != "" {
		return img.Repo + ":" + orDefault(img.Tag, DefaultTag)
	}
	repo := proxyImage
	if at := strings.Index(repo, "@"); at >= 0 {
		repo = repo[:at]
	}
	if c := strings.LastIndex(repo, ":"); c > strings.LastIndex(repo, "/") {
		repo = repo[:c]
	}
	return repo + ":" + img.Tag
}

func orDefault(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

// Render returns the nameserver's objects for dc, in apply order: the
// ServiceAccount, the records ConfigMap (records is its records.json), the
// Deployment and the Service. Each is owned by the DNSConfig, so that the
// garbage collector removes them with it even if the operator is gone.
func Render(dc *v1alpha1.DNSConfig, s settings.Settings, records string) []any {
	labels := Labels(dc, s.Namespace)
	owner := []metav1.OwnerReference{*metav1.NewControllerRef(dc, v1alpha1.GroupVersion.WithKind("DNSConfig"))}
	meta := func(name string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: name, Namespace: s.Namespace, Labels: maps.Clone(labels), OwnerReferences: owner}
	}
	no := false
	sa := &corev1.ServiceAccount{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ServiceAccount"},
		ObjectMeta: meta(Name),
		// The nameserver reads its records from the mounted ConfigMap and
		// never calls the API server: it gets no token and no Role.
		AutomountServiceAccountToken: &no,
	}
	cm := &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: meta(nameserver.ConfigMapName),
		Data:       map[string]string{nameserver.RecordsKey: records},
	}
	ns := dc.Spec.Nameserver
	replicas := int32(1)
	if ns.Replicas != nil {
		replicas = *ns.Replicas
	}
	selector := map[string]string{"app": Name}
	podLabels := maps.Clone(labels)
	maps.Copy(podLabels, selector)
	ro := true
	pod := corev1.PodSpec{
		ServiceAccountName:           Name,
		AutomountServiceAccountToken: &no,
		// The restricted Pod Security Standard, with the container's
		// context: non-root (the image's user 65532), RuntimeDefault seccomp.
		SecurityContext: &corev1.PodSecurityContext{
			RunAsNonRoot:   &ro,
			SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
		},
		Containers: []corev1.Container{{
			Name:            Name,
			Image:           Image(dc, s.ProxyImage),
			ImagePullPolicy: corev1.PullIfNotPresent,
			// The official image ignores its arguments; ours is the proxy
			// binary, for which "nameserver" selects the nameserver.
			Args: []string{"nameserver"},
			Ports: []corev1.ContainerPort{
				{Name: "tcp", Protocol: corev1.ProtocolTCP, ContainerPort: port},
				{Name: "udp", Protocol: corev1.ProtocolUDP, ContainerPort: port},
			},
			VolumeMounts: []corev1.VolumeMount{{Name: nameserver.ConfigMapName, MountPath: "/config", ReadOnly: true}},
			ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{
				TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(port)}}, PeriodSeconds: 5},
			SecurityContext: &corev1.SecurityContext{
				AllowPrivilegeEscalation: &no, ReadOnlyRootFilesystem: &ro,
				Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
			},
		}},
		Volumes: []corev1.Volume{{Name: nameserver.ConfigMapName, VolumeSource: corev1.VolumeSource{
			ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: nameserver.ConfigMapName}}}}},
	}
	if ns.Pod != nil {
		pod.Tolerations, pod.Affinity, pod.NodeSelector = ns.Pod.Tolerations, ns.Pod.Affinity, ns.Pod.NodeSelector
	}
	deploy := &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: meta(Name),
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: selector},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: podLabels}, Spec: pod},
		},
	}
	svc := &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: meta(Name),
		Spec: corev1.ServiceSpec{
			Selector: selector,
			Ports: []corev1.ServicePort{
				{Name: "udp", Protocol: corev1.ProtocolUDP, Port: 53, TargetPort: intstr.FromInt32(port)},
				{Name: "tcp", Protocol: corev1.ProtocolTCP, Port: 53, TargetPort: intstr.FromInt32(port)},
			},
		},
	}
	if ns.Service != nil {
		svc.Spec.ClusterIP = ns.Service.ClusterIP
	}
	return []any{sa, cm, deploy, svc}
}
