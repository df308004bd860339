package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// DNSConfig asks for a nameserver in the cluster that answers for the
// tailnet's MagicDNS names of the operator's egress proxies, Ingresses and
// ProxyGroups, so that cluster workloads can use those names. Point the
// cluster DNS at it for ts.net (a CoreDNS stub domain forwarding to
// status.nameserver.ip). Only one DNSConfig may exist.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=dc
// +kubebuilder:printcolumn:name="NameserverIP",type="string",JSONPath=`.status.nameserver.ip`,description="ClusterIP of the nameserver's Service."
// +kubebuilder:printcolumn:name="Status",type="string",JSONPath=`.status.conditions[?(@.type == "NameserverReady")].reason`,priority=1,description="Why the nameserver is or is not ready (kubectl get -o wide only)."
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp"
type DNSConfig struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// The nameserver wanted.
	Spec DNSConfigSpec `json:"spec"`

	// What the operator observed of the nameserver.
	// +optional
	Status DNSConfigStatus `json:"status"`
}

// DNSConfigList is a list of DNSConfigs.
//
// +kubebuilder:object:root=true
type DNSConfigList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata"`

	Items []DNSConfig `json:"items"`
}

// DNSConfigSpec is the wanted nameserver.
type DNSConfigSpec struct {
	// The nameserver the operator runs for the tailnet's names.
	Nameserver *Nameserver `json:"nameserver"`
}

// Nameserver holds the nameserver's settings.
type Nameserver struct {
	// Image of the nameserver.
	// +optional
	Image *NameserverImage `json:"image,omitempty"`

	// Settings of the nameserver's Service.
	// +optional
	Service *NameserverService `json:"service,omitempty"`

	// Scheduling settings of the nameserver's Pods.
	// +optional
	Pod *NameserverPod `json:"pod,omitempty"`

	// Number of nameserver Pods; 1 when unset.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Replicas *int32 `json:"replicas,omitempty"`
}

// NameserverImage is the nameserver's container image.
type NameserverImage struct {
	// Image repository.
	// +optional
	Repo string `json:"repo,omitempty"`

	// Image tag.
	// +optional
	Tag string `json:"tag,omitempty"`
}

// NameserverService holds settings of the nameserver's Service.
type NameserverService struct {
	// Fixed ClusterIP of the Service; one is allocated when empty.
	// +optional
	ClusterIP string `json:"clusterIP,omitempty"`
}

// NameserverPod holds scheduling settings of the nameserver's Pods.
type NameserverPod struct {
	// Taints the Pods tolerate.
	// +optional
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`

	// Scheduling affinity of the Pods.
	// +optional
	Affinity *corev1.Affinity `json:"affinity,omitempty"`

	// Node labels the Pods must be scheduled on.
	// +optional
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`
}

// DNSConfigStatus is what the operator observed of a DNSConfig.
type DNSConfigStatus struct {
	// NameserverReady and its reason.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// Where the nameserver answers.
	// +optional
	Nameserver *NameserverStatus `json:"nameserver,omitempty"`
}

// NameserverStatus says where the nameserver answers.
type NameserverStatus struct {
	// ClusterIP of the nameserver's Service: the address to forward ts.net
	// queries to. It changes when the DNSConfig is deleted and created
	// again.
	// +optional
	IP string `json:"ip,omitempty"`
}

// NameserverReady is the condition type of a DNSConfig.
const NameserverReady = "NameserverReady"
