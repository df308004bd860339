package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// ProxyGroup is a set of tailnet proxies run as one StatefulSet with several
// replicas. Ingress and egress groups serve many Services and Ingresses from
// shared, highly available proxies (chosen with the tailscale.com/proxy-group
// annotation); a kube-apiserver group exposes the cluster's API server on the
// tailnet.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=pg
// +kubebuilder:printcolumn:name="Status",type="string",JSONPath=`.status.conditions[?(@.type == "ProxyGroupReady")].reason`,description="Why the ProxyGroup is or is not ready."
// +kubebuilder:printcolumn:name="URL",type="string",JSONPath=`.status.url`,description="Tailnet URL of the API server proxy (kube-apiserver groups only)."
// +kubebuilder:printcolumn:name="Type",type="string",JSONPath=`.spec.type`,description="What the proxies do: egress, ingress or kube-apiserver."
// +kubebuilder:printcolumn:name="Pods",type="string",JSONPath=`.status.conditions[?(@.type == "ProxyGroupAvailable")].message`,priority=1,description="Replicas running of those wanted, e.g. 2/2 ProxyGroup pods running (kubectl get -o wide only)."
// +kubebuilder:printcolumn:name="Devices",type="string",JSONPath=`.status.devices[*].hostname`,priority=1,description="Tailnet hostnames of the replicas' devices (kubectl get -o wide only)."
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp"
type ProxyGroup struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// The proxies wanted: their type, count, tags and settings.
	Spec ProxyGroupSpec `json:"spec"`

	// What the operator observed of the group's proxies.
	// +optional
	Status ProxyGroupStatus `json:"status"`
}

// ProxyGroupList is a list of ProxyGroups.
//
// +kubebuilder:object:root=true
type ProxyGroupList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata"`

	Items []ProxyGroup `json:"items"`
}

// ProxyGroupSpec is the wanted shape of a ProxyGroup.
type ProxyGroupSpec struct {
	// What the proxies do: "ingress" serves cluster workloads to the
	// tailnet, "egress" lets cluster workloads reach tailnet devices,
	// "kube-apiserver" exposes the Kubernetes API server. Fixed at creation.
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="ProxyGroup type is immutable"
	Type ProxyGroupType `json:"type"`

	// ACL tags given to the group's devices; the operator's proxy tags
	// (PROXY_TAGS, tag:k8s by default) when empty. The operator's OAuth
	// client must own them. They apply to devices created afterwards.
	// +optional
	Tags Tags `json:"tags,omitempty"`

	// Number of proxies (StatefulSet replicas). The operator runs 2 when
	// this is unset.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Replicas *int32 `json:"replicas,omitempty"`

	// Prefix of the devices' hostnames: replica N is named <prefix>-N.
	// Defaults to the ProxyGroup's name. Lowercase letters, digits and
	// dashes, not starting with a dash, 1 to 62 characters.
	// +optional
	HostnamePrefix HostnamePrefix `json:"hostnamePrefix,omitempty"`

	// Name of the ProxyClass whose settings apply to the group's proxies.
	// When empty, the operator's default ProxyClass (PROXY_DEFAULT_CLASS)
	// applies, if one is set.
	// +optional
	ProxyClass string `json:"proxyClass,omitempty"`

	// Settings used only by groups of type kube-apiserver.
	// +optional
	KubeAPIServer *KubeAPIServerConfig `json:"kubeAPIServer,omitempty"`

	// Name of the Tailnet object whose credentials the devices join with.
	// Empty means the operator's own tailnet. Fixed at creation.
	// +optional
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="ProxyGroup tailnet is immutable"
	Tailnet string `json:"tailnet,omitempty"`
}

// ProxyGroupType is what a ProxyGroup's proxies do.
//
// +kubebuilder:validation:Type=string
// +kubebuilder:validation:Enum=egress;ingress;kube-apiserver
type ProxyGroupType string

// The ProxyGroup types.
const (
	ProxyGroupTypeEgress        ProxyGroupType = "egress"
	ProxyGroupTypeIngress       ProxyGroupType = "ingress"
	ProxyGroupTypeKubeAPIServer ProxyGroupType = "kube-apiserver"
)

// HostnamePrefix is the prefix of a group's device hostnames.
//
// +kubebuilder:validation:Type=string
// +kubebuilder:validation:Pattern=`^[a-z0-9][a-z0-9-]{0,61}$`
type HostnamePrefix string

// APIServerProxyMode is how a kube-apiserver group forwards requests.
//
// +kubebuilder:validation:Type=string
// +kubebuilder:validation:Enum=auth;noauth
type APIServerProxyMode string

// The API server proxy modes.
const (
	APIServerProxyModeAuth   APIServerProxyMode = "auth"
	APIServerProxyModeNoAuth APIServerProxyMode = "noauth"
)

// KubeAPIServerConfig holds the settings of a kube-apiserver ProxyGroup.
type KubeAPIServerConfig struct {
	// "auth" (the default) makes requests on behalf of the caller's tailnet
	// identity through impersonation; "noauth" forwards them unchanged.
	// +optional
	Mode *APIServerProxyMode `json:"mode,omitempty"`

	// Tailnet hostname of the API server proxy, a DNS label of at most 63
	// characters, unique in the tailnet. Defaults to the ProxyGroup's name.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`
	// +optional
	Hostname string `json:"hostname,omitempty"`
}

// ProxyGroupStatus is what the operator observed of a ProxyGroup.
type ProxyGroupStatus struct {
	// Current state. ProxyGroupReady is True when every proxy is up and the
	// spec has been acted on; ProxyGroupAvailable is True when at least one
	// proxy can serve traffic. kube-apiserver groups also report
	// KubeAPIServerProxyValid and KubeAPIServerProxyConfigured.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// The group's tailnet devices, one per running replica.
	// +listType=map
	// +listMapKey=hostname
	// +optional
	Devices []TailnetDevice `json:"devices,omitempty"`

	// Tailnet URL of the API server proxy (kube-apiserver groups only).
	// +optional
	URL string `json:"url,omitempty"`
}
