package v1alpha1

// Tag is an ACL tag of the form tag:<name>.
//
// +kubebuilder:validation:Type=string
// +kubebuilder:validation:Pattern=`^tag:[a-zA-Z][a-zA-Z0-9-]*$`
type Tag string

// Tags is a list of ACL tags.
type Tags []Tag

// Strings returns the tags as plain strings.
func (t Tags) Strings() []string {
	out := make([]string, len(t))
	for i, tag := range t {
		out[i] = string(tag)
	}
	return out
}

// TailnetDevice is one tailnet device that runs for a Tailscale resource.
type TailnetDevice struct {
	// The device's hostname on the tailnet.
	Hostname string `json:"hostname"`

	// The device's tailnet addresses, IPv4 and IPv6.
	// +optional
	TailnetIPs []string `json:"tailnetIPs,omitempty"`

	// Addresses configured by the user (ProxyClass staticEndpoints) at
	// which peers can reach the device directly.
	// +optional
	StaticEndpoints []string `json:"staticEndpoints,omitempty"`
}

// Condition types and reasons set on the kinds of this package, with the
// official operator's names.
const (
	ConnectorReady  = "ConnectorReady"
	ProxyClassReady = "ProxyClassReady"

	ProxyGroupReady     = "ProxyGroupReady"
	ProxyGroupAvailable = "ProxyGroupAvailable"

	ReasonProxyClassValid   = "ProxyClassValid"
	ReasonProxyClassInvalid = "ProxyClassInvalid"

	ReasonProxyGroupReady              = "ProxyGroupReady"
	ReasonProxyGroupAvailable          = "ProxyGroupAvailable"
	ReasonProxyGroupCreating           = "ProxyGroupCreating"
	ReasonProxyGroupCreationFailed     = "ProxyGroupCreationFailed"
	ReasonProxyGroupInvalid            = "ProxyGroupInvalid"
	ReasonProxyGroupTailnetUnavailable = "ProxyGroupTailnetUnavailable"

	ReasonConnectorCreated        = "ConnectorCreated"
	ReasonConnectorCreating       = "ConnectorCreating"
	ReasonConnectorCreationFailed = "ConnectorCreationFailed"
	ReasonConnectorInvalid        = "ConnectorInvalid"
)
