// Package resources names the resources the handler modules watch and write,
// for the dynamic client and the runtime: Kubernetes' own, and the
// tailscale.com and tailplane.dev kinds as crds/ defines them. It imports
// only crds/ and apimachinery.
package resources

import (
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/tailplane/tailplane/crds"
	"github.com/tailplane/tailplane/crds/tailscale/v1alpha1"
)

// Kubernetes resources.
var (
	Services        = schema.GroupVersionResource{Version: "v1", Resource: "services"}
	Namespaces      = schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}
	Secrets         = schema.GroupVersionResource{Version: "v1", Resource: "secrets"}
	ServiceAccounts = schema.GroupVersionResource{Version: "v1", Resource: "serviceaccounts"}
	StatefulSets    = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "statefulsets"}
	Roles           = schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "roles"}
	RoleBindings    = schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "rolebindings"}
	Ingresses       = schema.GroupVersionResource{Group: "networking.k8s.io", Version: "v1", Resource: "ingresses"}
	IngressClasses  = schema.GroupVersionResource{Group: "networking.k8s.io", Version: "v1", Resource: "ingressclasses"}
	Pods            = schema.GroupVersionResource{Version: "v1", Resource: "pods"}
	Nodes           = schema.GroupVersionResource{Version: "v1", Resource: "nodes"}
	// ClusterRoleBindings bind kube-apiserver ProxyGroups' impersonation.
	ClusterRoleBindings = schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterrolebindings"}
	EndpointSlices      = schema.GroupVersionResource{Group: "discovery.k8s.io", Version: "v1", Resource: "endpointslices"}
	// Deployments and ConfigMaps run a DNSConfig's nameserver and hold its
	// records.
	Deployments = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
	ConfigMaps  = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	// ValidatingAdmissionPolicies and their bindings enforce
	// ProxyGroupPolicies.
	ValidatingAdmissionPolicies       = schema.GroupVersionResource{Group: "admissionregistration.k8s.io", Version: "v1", Resource: "validatingadmissionpolicies"}
	ValidatingAdmissionPolicyBindings = schema.GroupVersionResource{Group: "admissionregistration.k8s.io", Version: "v1", Resource: "validatingadmissionpolicybindings"}
	// CustomResourceDefinitions are read by name: whether an optional API
	// is installed, and which version.
	CustomResourceDefinitions = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
)

// Gateway API resources (sigs.k8s.io/gateway-api), served only when its CRDs
// are installed.
var (
	GatewayClasses  = gatewayAPI("gatewayclasses")
	Gateways        = gatewayAPI("gateways")
	HTTPRoutes      = gatewayAPI("httproutes")
	GRPCRoutes      = gatewayAPI("grpcroutes")
	TLSRoutes       = gatewayAPI("tlsroutes")
	TCPRoutes       = gatewayAPI("tcproutes")
	UDPRoutes       = gatewayAPI("udproutes")
	ReferenceGrants = gatewayAPI("referencegrants")
)

// gatewayAPI is a resource of the Gateway API's group at v1, the version
// every kind the operator reads is served at (standard channel, v1.6).
func gatewayAPI(resource string) schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: "gateway.networking.k8s.io", Version: "v1", Resource: resource}
}

// The custom resources, from crds/.
var (
	ProxyClasses   = v1alpha1.ProxyClassesResource
	Connectors     = v1alpha1.ConnectorsResource
	ProxyGroups    = v1alpha1.ProxyGroupsResource
	RoutingPlugins = crds.RoutingPluginsResource

	ProxyGroupPolicies = v1alpha1.ProxyGroupPoliciesResource
	Recorders          = v1alpha1.RecordersResource
	PeerRelays         = v1alpha1.PeerRelaysResource
	DNSConfigs         = v1alpha1.DNSConfigsResource
	Tailnets           = v1alpha1.TailnetsResource
)

// byKind maps the kinds the operator applies to their resources.
var byKind = map[string]schema.GroupVersionResource{
	"Service": Services, "Secret": Secrets, "ServiceAccount": ServiceAccounts, "StatefulSet": StatefulSets,
	"Role": Roles, "RoleBinding": RoleBindings, "EndpointSlice": EndpointSlices, "ClusterRoleBinding": ClusterRoleBindings, "Ingress": Ingresses, "IngressClass": IngressClasses,
	"ProxyClass": ProxyClasses, "Connector": Connectors, "ProxyGroup": ProxyGroups, "RoutingPlugin": RoutingPlugins,
	"Deployment": Deployments, "ConfigMap": ConfigMaps,
	"ValidatingAdmissionPolicy": ValidatingAdmissionPolicies, "ValidatingAdmissionPolicyBinding": ValidatingAdmissionPolicyBindings,
}

// OfKind returns the resource of a kind the operator applies.
func OfKind(kind string) (schema.GroupVersionResource, bool) {
	r, ok := byKind[kind]
	return r, ok
}
