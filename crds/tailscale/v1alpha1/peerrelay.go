package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// PeerRelay runs Tailscale peer relays in the cluster: devices that relay UDP
// traffic between tailnet peers that cannot reach each other directly.
// Tailplane accepts PeerRelays so that manifests written for the official
// operator apply, but does not run them yet: it says so in the PeerRelayReady
// condition.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=pr
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp"
// +kubebuilder:printcolumn:name="Status",type="string",JSONPath=`.status.conditions[?(@.type == "PeerRelayReady")].reason`,description="Why the PeerRelay is or is not ready."
// +kubebuilder:printcolumn:name="Endpoints",type="string",JSONPath=`.status.endpoints[*].address`,description="Public addresses of the relays."
type PeerRelay struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// The relays wanted.
	Spec PeerRelaySpec `json:"spec"`

	// What the operator observed of the relays.
	// +optional
	Status PeerRelayStatus `json:"status"`
}

// PeerRelayList is a list of PeerRelays.
//
// +kubebuilder:object:root=true
type PeerRelayList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata"`

	Items []PeerRelay `json:"items"`
}

// PeerRelaySpec is the wanted set of relays.
//
// +kubebuilder:validation:XValidation:rule="!has(self.aws) || !has(self.aws.elasticIPs) || self.aws.elasticIPs.size() >= self.replicas",message="spec.aws.elasticIPs must contain at least one entry per replica"
type PeerRelaySpec struct {
	// ACL tags of the relays' devices; tag:k8s when empty. The operator's
	// OAuth client must own them.
	// +optional
	Tags Tags `json:"tags,omitempty"`

	// Prefix of the devices' hostnames: replica N is named <prefix>-N.
	// Defaults to the PeerRelay's name.
	// +optional
	HostnamePrefix HostnamePrefix `json:"hostnamePrefix,omitempty"`

	// Name of the ProxyClass whose settings apply to the relays.
	// +optional
	ProxyClass string `json:"proxyClass,omitempty"`

	// Number of relays.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:default=1
	Replicas *int32 `json:"replicas,omitempty"`

	// Name of the Tailnet object whose tailnet the relays join; the
	// operator's own when empty. Fixed at creation.
	// +optional
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="PeerRelay tailnet is immutable"
	Tailnet string `json:"tailnet,omitempty"`

	// Settings of the LoadBalancer Services the relays are reached through.
	// +optional
	Service *PeerRelayService `json:"service,omitempty"`

	// AWS Elastic IPs and subnets to pin the replicas to (EKS with the AWS
	// Load Balancer Controller).
	// +optional
	AWS *PeerRelayAWS `json:"aws,omitempty"`
}

// PeerRelayService holds settings of a relay's LoadBalancer Service.
type PeerRelayService struct {
	// Annotations added to the Service.
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`
}

// PeerRelayAWS pins relays to AWS Elastic IPs.
type PeerRelayAWS struct {
	// One Elastic IP and subnet per replica: replica N uses entry N. At
	// least as many entries as replicas.
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	ElasticIPs []PeerRelayAWSElasticIP `json:"elasticIPs"`
}

// PeerRelayAWSElasticIP is one Elastic IP allocation and its subnet.
type PeerRelayAWSElasticIP struct {
	// Elastic IP allocation ID (eipalloc-...).
	// +kubebuilder:validation:Pattern=`^eipalloc-[0-9a-f]+$`
	AllocationID string `json:"allocationID"`

	// Public subnet of the replica's load balancer (subnet-...).
	// +kubebuilder:validation:Pattern=`^subnet-[0-9a-f]+$`
	SubnetID string `json:"subnetID"`
}

// PeerRelayStatus is what the operator observed of a PeerRelay.
type PeerRelayStatus struct {
	// PeerRelayReady and its reason.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// Public addresses and UDP ports the relays are reached on.
	// +listType=map
	// +listMapKey=replica
	// +listMapKey=address
	// +optional
	Endpoints []PeerRelayEndpoint `json:"endpoints,omitempty"`
}

// PeerRelayEndpoint is one public address of a relay.
type PeerRelayEndpoint struct {
	// Index of the replica.
	Replica int32 `json:"replica"`

	// Public IP address or hostname of the replica's load balancer.
	Address string `json:"address"`

	// UDP port of the relay.
	Port int32 `json:"port"`
}

// PeerRelayReady is the condition type of a PeerRelay.
const PeerRelayReady = "PeerRelayReady"
