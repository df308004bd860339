package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// Tailnet names another tailnet, by the credentials of an OAuth client of
// that tailnet, which ProxyGroups, Connectors, Recorders and PeerRelays can
// join through their spec.tailnet instead of the operator's own tailnet.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=tn
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp"
// +kubebuilder:printcolumn:name="Status",type="string",JSONPath=`.status.conditions[?(@.type == "TailnetReady")].reason`,description="Whether the operator can use the tailnet's credentials."
type Tailnet struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Where the tailnet is and how to authenticate to it.
	Spec TailnetSpec `json:"spec"`

	// What the operator found when it tried the credentials.
	// +optional
	Status TailnetStatus `json:"status"`
}

// TailnetList is a list of Tailnets.
//
// +kubebuilder:object:root=true
type TailnetList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata"`

	Items []Tailnet `json:"items"`
}

// TailnetSpec locates a tailnet and its credentials.
type TailnetSpec struct {
	// Control server of the tailnet (its base URL, also that of its API).
	// Tailscale's own control server when empty.
	// +optional
	LoginURL string `json:"loginUrl,omitempty"`

	// The OAuth client the operator uses for this tailnet.
	Credentials TailnetCredentials `json:"credentials"`
}

// TailnetCredentials names the Secret holding a tailnet's OAuth client.
type TailnetCredentials struct {
	// Secret in the operator's namespace. It always has the key client_id;
	// with it either client_secret (a plain OAuth client) or audience
	// (workload identity: the operator exchanges a token of its own
	// ServiceAccount, minted for that audience), never both.
	SecretName string `json:"secretName"`
}

// TailnetStatus is what the operator found of a Tailnet.
type TailnetStatus struct {
	// TailnetReady: True when the credentials work.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// TailnetReady is the condition type of a Tailnet.
const TailnetReady = "TailnetReady"
