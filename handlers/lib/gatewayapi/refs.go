package gatewayapi

import (
	"crypto/tls"
	"fmt"
	"net"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/tailplane/tailplane/proxy/config"
)

// Lookups are how Render reads the cluster. Each returns nil and no error
// for an object that does not exist; the handler backs them with the API
// server, tests with maps.
type Lookups struct {
	// Service reads a backend Service.
	Service func(namespace, name string) (*corev1.Service, error)
	// Secret reads a listener's certificate Secret.
	Secret func(namespace, name string) (*corev1.Secret, error)
	// NamespaceLabels reads a namespace's labels (allowedRoutes
	// selectors); nil labels and no error for a namespace that does not
	// exist.
	NamespaceLabels func(name string) (map[string]string, error)
	// Plugin resolves an ExtensionRef filter naming a RoutingPlugin in
	// namespace: its proxy entry and the Secret holding its module, ok
	// false when there is none that serves.
	Plugin func(namespace, name string) (plugin config.Plugin, secret string, ok bool, err error)
	// ClusterDomain is the cluster's DNS domain (cluster.local when
	// empty): a headless Service is reached by its DNS name, which
	// resolves to its endpoints' addresses.
	ClusterDomain string
}

// unresolved says why a reference does not resolve: a route or listener
// condition reason and its message.
type unresolved struct {
	Reason  string
	Message string
}

// permitted reports whether a reference from a fromKind object in
// fromNamespace to toKind toName in toNamespace is allowed: always within
// a namespace, across namespaces only when a ReferenceGrant in toNamespace
// says so.
func permitted(grants []gatewayv1.ReferenceGrant, fromKind, fromNamespace, toGroup, toKind, toNamespace, toName string) bool {
	if fromNamespace == toNamespace {
		return true
	}
	for _, g := range grants {
		if g.Namespace != toNamespace {
			continue
		}
		from := false
		for _, f := range g.Spec.From {
			if string(f.Group) == Group && string(f.Kind) == fromKind && string(f.Namespace) == fromNamespace {
				from = true
				break
			}
		}
		if !from {
			continue
		}
		for _, t := range g.Spec.To {
			if string(t.Group) == toGroup && string(t.Kind) == toKind && (t.Name == nil || string(*t.Name) == toName) {
				return true
			}
		}
	}
	return false
}

// Application protocols of Service ports that change how the proxy speaks to
// a backend (Service.spec.ports[].appProtocol, KEP-3726's names).
const (
	AppProtocolH2C   = "kubernetes.io/h2c"
	AppProtocolHTTPS = "kubernetes.io/https"
)

// resolveBackend resolves one backendRef of route r: a Service port in
// reach, reached at its ClusterIP (or ExternalName). An unresolved backend
// keeps its weight and is marked Invalid, so that its share of requests is
// answered 500 as the spec requires. h2c says the route speaks HTTP/2
// without TLS to its backends unless the port says https (GRPCRoute).
func resolveBackend(r *Route, ref gatewayv1.BackendRef, h2c bool, grants []gatewayv1.ReferenceGrant, look Lookups) (config.WeightedBackend, *unresolved, error) {
	ns := r.Namespace
	if ref.Namespace != nil {
		ns = string(*ref.Namespace)
	}
	weight := int32(1)
	if ref.Weight != nil {
		weight = *ref.Weight
	}
	name := ns + "/" + string(ref.Name)
	if ref.Port != nil {
		name += ":" + strconv.Itoa(int(*ref.Port))
	}
	out := config.WeightedBackend{Backend: config.Backend{Service: name}, Weight: weight, Invalid: true}
	if ref.Group != nil && *ref.Group != "" || ref.Kind != nil && *ref.Kind != "Service" {
		return out, &unresolved{string(gatewayv1.RouteReasonInvalidKind),
			fmt.Sprintf("backendRef %s: only core Services are supported backends", name)}, nil
	}
	if !permitted(grants, r.Kind, r.Namespace, "", "Service", ns, string(ref.Name)) {
		return out, &unresolved{string(gatewayv1.RouteReasonRefNotPermitted),
			fmt.Sprintf("backendRef %s: no ReferenceGrant in namespace %s allows %s references from namespace %s", name, ns, r.Kind, r.Namespace)}, nil
	}
	if ref.Port == nil {
		return out, &unresolved{string(gatewayv1.RouteReasonUnsupportedValue), fmt.Sprintf("backendRef %s: port is required for a Service", name)}, nil
	}
	svc, err := look.Service(ns, string(ref.Name))
	if err != nil {
		return out, nil, fmt.Errorf("read Service %s/%s: %w", ns, ref.Name, err)
	}
	if svc == nil {
		return out, &unresolved{string(gatewayv1.RouteReasonBackendNotFound), fmt.Sprintf("backendRef %s: Service %s/%s does not exist", name, ns, ref.Name)}, nil
	}
	var port *corev1.ServicePort
	for i := range svc.Spec.Ports {
		if svc.Spec.Ports[i].Port == int32(*ref.Port) {
			port = &svc.Spec.Ports[i]
		}
	}
	if port == nil {
		return out, &unresolved{string(gatewayv1.RouteReasonBackendNotFound), fmt.Sprintf("backendRef %s: Service %s/%s has no port %d", name, ns, ref.Name, *ref.Port)}, nil
	}
	host, dialPort := svc.Spec.ClusterIP, port.Port
	switch {
	case svc.Spec.Type == corev1.ServiceTypeExternalName:
		host = svc.Spec.ExternalName
	case host == "" || host == corev1.ClusterIPNone:
		// A headless Service has no virtual IP to translate its port:
		// its DNS name resolves to the endpoints, which listen on the
		// target port.
		var miss *unresolved
		if host, dialPort, miss = headlessAddress(svc, port, look.ClusterDomain); miss != nil {
			miss.Message = fmt.Sprintf("backendRef %s: %s", name, miss.Message)
			return out, miss, nil
		}
	}
	out.Invalid = false
	out.Address = net.JoinHostPort(host, strconv.Itoa(int(dialPort)))
	app := ""
	if port.AppProtocol != nil {
		app = *port.AppProtocol
	}
	out.HTTPS = app == AppProtocolHTTPS || app == "https"
	out.H2C = app == AppProtocolH2C || h2c && !out.HTTPS
	return out, nil, nil
}

// headlessAddress is where the proxy dials port of headless Service svc:
// the Service's DNS name in domain and the port its endpoints listen on.
// A named targetPort would need the endpoints' port names, which Render
// does not read, so it is refused with a message that says what to write.
func headlessAddress(svc *corev1.Service, port *corev1.ServicePort, domain string) (string, int32, *unresolved) {
	if domain == "" {
		domain = "cluster.local"
	}
	host := svc.Name + "." + svc.Namespace + ".svc." + domain
	switch {
	case port.TargetPort.Type == intstr.String && port.TargetPort.StrVal != "":
		return "", 0, &unresolved{string(gatewayv1.RouteReasonBackendNotFound), fmt.Sprintf(
			"headless Service %s/%s port %d has the named targetPort %q; a headless backend needs a numeric targetPort (the port its endpoints listen on)",
			svc.Namespace, svc.Name, port.Port, port.TargetPort.StrVal)}
	case port.TargetPort.IntVal != 0:
		return host, port.TargetPort.IntVal, nil
	}
	return host, port.Port, nil
}

// resolveCertificate resolves an HTTPS listener's first certificateRef: a
// kubernetes.io/tls Secret with a key pair that parses, in the Gateway's
// namespace or one whose ReferenceGrant allows it. missing says the Secret
// does not exist (yet).
func resolveCertificate(gw *gatewayv1.Gateway, ref gatewayv1.SecretObjectReference, grants []gatewayv1.ReferenceGrant, look Lookups) (_ *corev1.Secret, _ *unresolved, missing bool, _ error) {
	ns := gw.Namespace
	if ref.Namespace != nil {
		ns = string(*ref.Namespace)
	}
	name := ns + "/" + string(ref.Name)
	if ref.Group != nil && *ref.Group != "" || ref.Kind != nil && *ref.Kind != "Secret" {
		return nil, &unresolved{string(gatewayv1.ListenerReasonInvalidCertificateRef), fmt.Sprintf("certificateRef %s: only core Secrets are supported", name)}, false, nil
	}
	if !permitted(grants, "Gateway", gw.Namespace, "", "Secret", ns, string(ref.Name)) {
		return nil, &unresolved{string(gatewayv1.ListenerReasonRefNotPermitted),
			fmt.Sprintf("certificateRef %s: no ReferenceGrant in namespace %s allows Gateway references from namespace %s", name, ns, gw.Namespace)}, false, nil
	}
	secret, err := look.Secret(ns, string(ref.Name))
	if err != nil {
		return nil, nil, false, fmt.Errorf("read Secret %s: %w", name, err)
	}
	if secret == nil {
		return nil, &unresolved{string(gatewayv1.ListenerReasonInvalidCertificateRef), fmt.Sprintf("certificateRef %s: Secret does not exist", name)}, true, nil
	}
	if _, err := tls.X509KeyPair(secret.Data[corev1.TLSCertKey], secret.Data[corev1.TLSPrivateKeyKey]); err != nil {
		return nil, &unresolved{string(gatewayv1.ListenerReasonInvalidCertificateRef), fmt.Sprintf("certificateRef %s: no valid tls.crt and tls.key: %v", name, err)}, false, nil
	}
	return secret, nil, false, nil
}
