package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupVersion is tailscale.com/v1alpha1.
var GroupVersion = schema.GroupVersion{Group: "tailscale.com", Version: "v1alpha1"}

// Resources of the kinds in this package, for dynamic clients.
var (
	ConnectorsResource   = GroupVersion.WithResource("connectors")
	ProxyClassesResource = GroupVersion.WithResource("proxyclasses")
	ProxyGroupsResource  = GroupVersion.WithResource("proxygroups")

	DNSConfigsResource         = GroupVersion.WithResource("dnsconfigs")
	RecordersResource          = GroupVersion.WithResource("recorders")
	TailnetsResource           = GroupVersion.WithResource("tailnets")
	ProxyGroupPoliciesResource = GroupVersion.WithResource("proxygrouppolicies")
	PeerRelaysResource         = GroupVersion.WithResource("peerrelays")
)

// AddToScheme registers the kinds of this package with a scheme, for typed
// conversion from unstructured objects.
func AddToScheme(scheme *runtime.Scheme) error {
	scheme.AddKnownTypes(GroupVersion,
		&Connector{}, &ConnectorList{},
		&ProxyClass{}, &ProxyClassList{},
		&ProxyGroup{}, &ProxyGroupList{},
		&DNSConfig{}, &DNSConfigList{},
		&Recorder{}, &RecorderList{},
		&Tailnet{}, &TailnetList{},
		&ProxyGroupPolicy{}, &ProxyGroupPolicyList{},
		&PeerRelay{}, &PeerRelayList{},
	)
	metav1.AddToGroupVersion(scheme, GroupVersion)
	return nil
}
