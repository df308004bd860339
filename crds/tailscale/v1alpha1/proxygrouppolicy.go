package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// ProxyGroupPolicy limits which ProxyGroups the Services and Ingresses of its
// namespace may name in their tailscale.com/proxy-group annotation. The
// operator merges every policy of a namespace into admission policies
// (ValidatingAdmissionPolicies ts-ingress-<namespace> and
// ts-egress-<namespace>), so that a Service or Ingress naming another group
// is refused when it is created or changed.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Namespaced,shortName=pgp
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp"
type ProxyGroupPolicy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// The ProxyGroups allowed in this namespace.
	Spec ProxyGroupPolicySpec `json:"spec"`

	// What the operator made of the policy.
	// +optional
	Status ProxyGroupPolicyStatus `json:"status"`
}

// ProxyGroupPolicyList is a list of ProxyGroupPolicies.
//
// +kubebuilder:object:root=true
type ProxyGroupPolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata"`

	Items []ProxyGroupPolicy `json:"items"`
}

// ProxyGroupPolicySpec lists the ProxyGroups allowed in a namespace.
type ProxyGroupPolicySpec struct {
	// ProxyGroups that Ingresses, and Services exposed to the tailnet
	// (loadBalancerClass tailscale or tailscale.com/expose), may name. An
	// empty list allows none.
	// +optional
	Ingress []string `json:"ingress,omitempty"`

	// ProxyGroups that the other Services (egress to the tailnet) may name.
	// An empty list allows none.
	// +optional
	Egress []string `json:"egress,omitempty"`
}

// ProxyGroupPolicyStatus is what the operator made of a ProxyGroupPolicy.
type ProxyGroupPolicyStatus struct {
	// Tailplane sets ProxyGroupPolicyReady: True once the namespace's
	// admission policies enforce this policy.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// ProxyGroupPolicyReady is the condition type Tailplane sets on a
// ProxyGroupPolicy (the official operator sets none).
const ProxyGroupPolicyReady = "ProxyGroupPolicyReady"
