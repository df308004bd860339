package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// Connector runs tailnet devices in the cluster that act as a subnet router,
// an exit node or an app connector. Its CRD (crds/tailscale.com_connectors.yaml)
// is written by hand; this type follows it.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=cn
type Connector struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// What the Connector's devices do on the tailnet.
	Spec ConnectorSpec `json:"spec"`

	// What the operator observed of the Connector's devices.
	// +optional
	Status ConnectorStatus `json:"status,omitempty"`
}

// ConnectorList is a list of Connectors.
//
// +kubebuilder:object:root=true
type ConnectorList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	Items []Connector `json:"items"`
}

// ConnectorSpec is what a Connector's devices do.
type ConnectorSpec struct {
	// ACL tags of the devices; the operator's proxy tags when empty.
	Tags Tags `json:"tags,omitempty"`
	// Tailnet hostname of the single device.
	Hostname string `json:"hostname,omitempty"`
	// Prefix of the replicas' hostnames (<prefix>-<ordinal>).
	HostnamePrefix string `json:"hostnamePrefix,omitempty"`
	// ProxyClass applied to the Connector's proxies.
	ProxyClass string `json:"proxyClass,omitempty"`
	// Subnet routes to advertise.
	SubnetRouter *SubnetRouter `json:"subnetRouter,omitempty"`
	// App connector settings.
	AppConnector *AppConnector `json:"appConnector,omitempty"`
	// Whether the devices are exit nodes.
	ExitNode bool `json:"exitNode,omitempty"`
	// Number of devices; 1 when unset.
	Replicas *int32 `json:"replicas,omitempty"`
	// Name of the Tailnet to join; the operator's own when empty.
	Tailnet string `json:"tailnet,omitempty"`
}

// SubnetRouter lists the routes a Connector advertises.
type SubnetRouter struct {
	// CIDR ranges to advertise.
	AdvertiseRoutes []string `json:"advertiseRoutes"`
}

// AppConnector configures a Connector as an app connector.
type AppConnector struct {
	// Routes advertised before any domain is resolved.
	Routes []string `json:"routes,omitempty"`
}

// ConnectorStatus is what the operator observed of a Connector.
type ConnectorStatus struct {
	// ConnectorReady and its reason.
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// Comma-separated routes the devices advertise.
	SubnetRoutes string `json:"subnetRoutes,omitempty"`
	// Whether the devices are exit nodes.
	IsExitNode bool `json:"isExitNode"`
	// Whether the devices are app connectors.
	IsAppConnector bool `json:"isAppConnector"`
	// Tailnet addresses of the first device.
	TailnetIPs []string `json:"tailnetIPs,omitempty"`
	// MagicDNS name of the first device.
	Hostname string `json:"hostname,omitempty"`
	// One entry per device.
	Devices []ConnectorDevice `json:"devices,omitempty"`
}

// ConnectorDevice is one device of a Connector.
type ConnectorDevice struct {
	// The device's MagicDNS name.
	Hostname string `json:"hostname,omitempty"`
	// The device's tailnet addresses.
	TailnetIPs []string `json:"tailnetIPs,omitempty"`
}
