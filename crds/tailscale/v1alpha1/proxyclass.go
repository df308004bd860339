package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ProxyClass is a named set of settings for the proxies the operator runs:
// StatefulSet and Pod metadata, scheduling, the proxy container, metrics and
// tailnet options. A Service or Ingress picks one with the
// tailscale.com/proxy-class label (or annotation); Connectors and ProxyGroups
// name one in spec.proxyClass. It is cluster-scoped.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster
// +kubebuilder:printcolumn:name="Status",type="string",JSONPath=`.status.conditions[?(@.type == "ProxyClassReady")].reason`,description="Why the ProxyClass is or is not ready for use."
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp"
type ProxyClass struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// The settings this class applies to proxies.
	Spec ProxyClassSpec `json:"spec"`

	// Whether the operator accepted the settings.
	// +optional
	Status ProxyClassStatus `json:"status"`
}

// ProxyClassList is a list of ProxyClasses.
//
// +kubebuilder:object:root=true
type ProxyClassList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata"`

	Items []ProxyClass `json:"items"`
}

// ProxyClassSpec is the settings a ProxyClass applies.
type ProxyClassSpec struct {
	// Settings for the StatefulSet that runs each proxy (Services,
	// Ingresses, Connectors and ProxyGroups each get one).
	// +optional
	StatefulSet *StatefulSet `json:"statefulSet,omitempty"`

	// Prometheus metrics of the proxies. Not applied to egress proxies.
	// +optional
	Metrics *Metrics `json:"metrics,omitempty"`

	// Tailnet options of the proxies' devices.
	// +optional
	TailscaleConfig *TailscaleConfig `json:"tailscale,omitempty"`

	// When true, HTTPS proxies (Ingress, ingress and kube-apiserver
	// ProxyGroups) get their certificates from Let's Encrypt's staging CA,
	// which has far higher rate limits but is not trusted by browsers.
	// Useful while testing. Certificates already issued are kept until
	// they are renewed.
	// +optional
	UseLetsEncryptStagingEnvironment bool `json:"useLetsEncryptStagingEnvironment,omitempty"`

	// Fixed UDP endpoints, on node addresses, through which tailnet peers
	// can reach the proxies directly instead of through relays.
	// +optional
	StaticEndpoints *StaticEndpointsConfig `json:"staticEndpoints,omitempty"`
}

// StaticEndpointsConfig configures static endpoints.
type StaticEndpointsConfig struct {
	// Static endpoints served through one NodePort Service per proxy.
	NodePort *NodePortConfig `json:"nodePort"`
}

// NodePortConfig says which NodePorts and nodes serve static endpoints.
type NodePortConfig struct {
	// Port ranges the operator picks NodePorts from. They must lie inside
	// the cluster's NodePort range (30000-32767 unless changed), and the
	// nodes' firewalls must let UDP to them in.
	// +kubebuilder:validation:MinItems=1
	Ports []PortRange `json:"ports"`

	// Labels of the nodes whose ExternalIP addresses are advertised as
	// endpoints. All nodes when empty.
	// +optional
	Selector map[string]string `json:"selector,omitempty"`
}

// PortRange is one port, or an inclusive range of ports.
type PortRange struct {
	// The first (or only) port.
	Port uint16 `json:"port"`

	// The last port of the range, at least port. Unset means the range is
	// only port.
	// +optional
	EndPort uint16 `json:"endPort,omitempty"`
}

// TailscaleConfig holds tailnet options of the proxies' devices.
type TailscaleConfig struct {
	// Whether the proxies use routes that other tailnet devices advertise
	// (subnet routes), like `tailscale set --accept-routes`. Defaults to
	// false.
	// +optional
	AcceptRoutes bool `json:"acceptRoutes,omitempty"`
}

// StatefulSet holds settings for a proxy's StatefulSet.
type StatefulSet struct {
	// Labels added to the StatefulSet. They are merged with the operator's
	// own labels, which they cannot replace.
	// +optional
	Labels Labels `json:"labels,omitempty"`

	// Annotations added to the StatefulSet, merged with the operator's own.
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`

	// Settings for the proxy Pods.
	// +optional
	Pod *Pod `json:"pod,omitempty"`
}

// Pod holds settings for a proxy's Pod template.
type Pod struct {
	// Labels added to the Pods, merged with the operator's own labels,
	// which they cannot replace.
	// +optional
	Labels Labels `json:"labels,omitempty"`

	// Annotations added to the Pods.
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`

	// Scheduling affinity of the Pods. None by default.
	// +optional
	Affinity *corev1.Affinity `json:"affinity,omitempty"`

	// Settings for the proxy container.
	// +optional
	TailscaleContainer *Container `json:"tailscaleContainer,omitempty"`

	// Settings for the init container of proxies that have one. Not valid
	// for ProxyGroups of type kube-apiserver.
	// +optional
	TailscaleInitContainer *Container `json:"tailscaleInitContainer,omitempty"`

	// Pod-level security context. None by default.
	// +optional
	SecurityContext *corev1.PodSecurityContext `json:"securityContext,omitempty"`

	// Secrets used to pull the proxy image.
	// +optional
	ImagePullSecrets []corev1.LocalObjectReference `json:"imagePullSecrets,omitempty"`

	// Node to run the Pods on, bypassing the scheduler.
	// +optional
	NodeName string `json:"nodeName,omitempty"`

	// Node labels the Pods must be scheduled on. None by default.
	// +optional
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`

	// Taints the Pods tolerate. None by default.
	// +optional
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`

	// How the Pods spread across topology domains. None by default.
	// +optional
	TopologySpreadConstraints []corev1.TopologySpreadConstraint `json:"topologySpreadConstraints,omitempty"`

	// PriorityClass of the Pods. None by default.
	// +optional
	PriorityClassName string `json:"priorityClassName,omitempty"`

	// DNS policy of the Pods; the cluster's default when unset.
	// +kubebuilder:validation:Enum=ClusterFirstWithHostNet;ClusterFirst;Default;None
	// +optional
	DNSPolicy *corev1.DNSPolicy `json:"dnsPolicy,omitempty"`

	// Extra DNS settings of the Pods; required when dnsPolicy is None.
	// +optional
	DNSConfig *corev1.PodDNSConfig `json:"dnsConfig,omitempty"`
}

// Metrics configures the proxies' Prometheus metrics.
//
// +kubebuilder:validation:XValidation:rule="!(has(self.serviceMonitor) && self.serviceMonitor.enable  && !self.enable)",message="ServiceMonitor can only be enabled if metrics are enabled"
type Metrics struct {
	// When true, each proxy serves metrics at <pod-ip>:9002/metrics, and a
	// Service <proxy>-metrics in the operator's namespace selects it.
	Enable bool `json:"enable"`

	// A Prometheus Operator ServiceMonitor for the metrics Service.
	// Requires enable.
	// +optional
	ServiceMonitor *ServiceMonitor `json:"serviceMonitor,omitempty"`
}

// ServiceMonitor configures a Prometheus Operator ServiceMonitor.
type ServiceMonitor struct {
	// When true, the operator creates the ServiceMonitor; the
	// ServiceMonitor CRD must be installed.
	Enable bool `json:"enable"`

	// Labels added to the ServiceMonitor.
	// +optional
	Labels Labels `json:"labels,omitempty"`
}

// Labels are Kubernetes labels. Values are checked by the CRD; keys by the
// operator, since their rules do not fit a pattern.
type Labels map[string]LabelValue

// Strings returns the labels as a plain map.
func (l Labels) Strings() map[string]string {
	if l == nil {
		return nil
	}
	out := make(map[string]string, len(l))
	for k, v := range l {
		out[k] = string(v)
	}
	return out
}

// LabelValue is a Kubernetes label value.
//
// +kubebuilder:validation:Type=string
// +kubebuilder:validation:Pattern=`^(([a-zA-Z0-9][-._a-zA-Z0-9]*)?[a-zA-Z0-9])?$`
// +kubebuilder:validation:MaxLength=63
type LabelValue string

// Container holds settings for one of a proxy's containers.
type Container struct {
	// Environment variables added to the container. They win over the
	// operator's own; overriding TS_* variables is not supported and draws
	// a warning Event.
	// +optional
	Env []Env `json:"env,omitempty"`

	// Image of the container, replacing the operator's proxy image
	// (PROXY_IMAGE).
	// +optional
	Image string `json:"image,omitempty"`

	// When to pull the image: Always, Never or IfNotPresent.
	// +kubebuilder:validation:Enum=Always;Never;IfNotPresent
	// +optional
	ImagePullPolicy corev1.PullPolicy `json:"imagePullPolicy,omitempty"`

	// CPU and memory requests and limits. None by default.
	// +optional
	Resources corev1.ResourceRequirements `json:"resources,omitempty"`

	// Container security context, replacing the operator's.
	// +optional
	SecurityContext *corev1.SecurityContext `json:"securityContext,omitempty"`

	// Debug endpoints of the proxy. Not for production.
	// +optional
	Debug *Debug `json:"debug,omitempty"`
}

// Debug configures a proxy's debug endpoints.
type Debug struct {
	// When true, the proxy serves pprof and debug metrics at
	// <pod-ip>:9001/debug/ (container port "debug"). Their shape may change
	// without notice.
	// +optional
	Enable bool `json:"enable"`
}

// Env is one environment variable.
type Env struct {
	// Name of the variable.
	Name Name `json:"name"`

	// Value of the variable; $(VAR) references to earlier variables are
	// expanded and $$ escapes a dollar sign. Empty by default.
	// +optional
	Value string `json:"value,omitempty"`
}

// Name is an environment variable name.
//
// +kubebuilder:validation:Type=string
// +kubebuilder:validation:Pattern=`^[-._a-zA-Z][-._a-zA-Z0-9]*$`
type Name string

// ProxyClassStatus is what the operator observed of a ProxyClass.
type ProxyClassStatus struct {
	// Current state. ProxyClassReady is True when the settings are valid
	// and observedGeneration matches the generation.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}
