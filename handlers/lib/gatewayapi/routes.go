package gatewayapi

import (
	"fmt"
	"sort"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/tailplane/tailplane/handlers/lib/cluster"
	"github.com/tailplane/tailplane/handlers/lib/resources"
)

// Route kinds, the Gateway API's.
const (
	KindHTTPRoute = "HTTPRoute"
	KindGRPCRoute = "GRPCRoute"
	KindTLSRoute  = "TLSRoute"
	KindTCPRoute  = "TCPRoute"
	KindUDPRoute  = "UDPRoute"
)

// ControllerName is the spec.controllerName of the GatewayClasses the
// operator serves, and the controllerName of its routes' status.parents
// entries.
const ControllerName gatewayv1.GatewayController = "tailplane.dev/gateway-controller"

// Group is the Gateway API's API group.
const Group = gatewayv1.GroupName

// RouteKinds are the route kinds the operator serves.
func RouteKinds() []string {
	return []string{KindHTTPRoute, KindGRPCRoute, KindTLSRoute, KindTCPRoute, KindUDPRoute}
}

// RouteResource is the resource of a route kind.
func RouteResource(kind string) schema.GroupVersionResource {
	switch kind {
	case KindHTTPRoute:
		return resources.HTTPRoutes
	case KindGRPCRoute:
		return resources.GRPCRoutes
	case KindTLSRoute:
		return resources.TLSRoutes
	case KindTCPRoute:
		return resources.TCPRoutes
	default:
		return resources.UDPRoutes
	}
}

// Route is any route kind, with what attachment needs in common; exactly
// the field of its kind is set.
type Route struct {
	Kind string
	metav1.ObjectMeta
	// ParentRefs and Hostnames are the spec's (TCP and UDP routes have no
	// hostnames).
	ParentRefs []gatewayv1.ParentReference
	Hostnames  []gatewayv1.Hostname
	// Parents is the route's status.parents as it is.
	Parents []gatewayv1.RouteParentStatus

	HTTP *gatewayv1.HTTPRoute
	GRPC *gatewayv1.GRPCRoute
	TLS  *gatewayv1.TLSRoute
	TCP  *gatewayv1.TCPRoute
	UDP  *gatewayv1.UDPRoute
}

// DecodeRoute reads a route object of kind.
func DecodeRoute(kind string, obj *unstructured.Unstructured) (*Route, error) {
	r := &Route{Kind: kind}
	var err error
	switch kind {
	case KindHTTPRoute:
		r.HTTP = &gatewayv1.HTTPRoute{}
		err = cluster.FromUnstructured(obj, r.HTTP)
		r.ObjectMeta, r.ParentRefs, r.Hostnames, r.Parents = r.HTTP.ObjectMeta, r.HTTP.Spec.ParentRefs, r.HTTP.Spec.Hostnames, r.HTTP.Status.Parents
	case KindGRPCRoute:
		r.GRPC = &gatewayv1.GRPCRoute{}
		err = cluster.FromUnstructured(obj, r.GRPC)
		r.ObjectMeta, r.ParentRefs, r.Hostnames, r.Parents = r.GRPC.ObjectMeta, r.GRPC.Spec.ParentRefs, r.GRPC.Spec.Hostnames, r.GRPC.Status.Parents
	case KindTLSRoute:
		r.TLS = &gatewayv1.TLSRoute{}
		err = cluster.FromUnstructured(obj, r.TLS)
		r.ObjectMeta, r.ParentRefs, r.Hostnames, r.Parents = r.TLS.ObjectMeta, r.TLS.Spec.ParentRefs, r.TLS.Spec.Hostnames, r.TLS.Status.Parents
	case KindTCPRoute:
		r.TCP = &gatewayv1.TCPRoute{}
		err = cluster.FromUnstructured(obj, r.TCP)
		r.ObjectMeta, r.ParentRefs, r.Parents = r.TCP.ObjectMeta, r.TCP.Spec.ParentRefs, r.TCP.Status.Parents
	case KindUDPRoute:
		r.UDP = &gatewayv1.UDPRoute{}
		err = cluster.FromUnstructured(obj, r.UDP)
		r.ObjectMeta, r.ParentRefs, r.Parents = r.UDP.ObjectMeta, r.UDP.Spec.ParentRefs, r.UDP.Status.Parents
	default:
		return nil, fmt.Errorf("unknown route kind %q", kind)
	}
	if err != nil {
		return nil, fmt.Errorf("decode %s %s/%s: %w", kind, obj.GetNamespace(), obj.GetName(), err)
	}
	return r, nil
}

// Key is the route's "<kind>/<namespace>/<name>".
func (r *Route) Key() string { return r.Kind + "/" + r.Namespace + "/" + r.Name }

// RefersTo reports whether ref names Gateway namespace/name (ref's
// namespace defaults to the route's).
func RefersTo(routeNamespace string, ref gatewayv1.ParentReference, namespace, name string) bool {
	if ref.Group != nil && string(*ref.Group) != Group || ref.Kind != nil && *ref.Kind != "Gateway" {
		return false
	}
	ns := routeNamespace
	if ref.Namespace != nil {
		ns = string(*ref.Namespace)
	}
	return ns == namespace && string(ref.Name) == name
}

// named are the "namespace/name" of the Gateways the route's parentRefs
// name, each once, sorted.
func (r *Route) named() []string {
	seen := map[string]bool{}
	var out []string
	for _, ref := range r.ParentRefs {
		if ref.Group != nil && string(*ref.Group) != Group || ref.Kind != nil && *ref.Kind != "Gateway" {
			continue
		}
		ns := r.Namespace
		if ref.Namespace != nil {
			ns = string(*ref.Namespace)
		}
		key := ns + "/" + string(ref.Name)
		if !seen[key] {
			seen[key] = true
			out = append(out, key)
		}
	}
	sort.Strings(out)
	return out
}

// SortRoutes orders routes as the Gateway API breaks precedence ties: the
// oldest first, then by namespace and name.
func SortRoutes(routes []*Route) {
	sort.SliceStable(routes, func(i, j int) bool {
		a, b := routes[i], routes[j]
		if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
			return a.CreationTimestamp.Before(&b.CreationTimestamp)
		}
		if a.Namespace != b.Namespace {
			return a.Namespace < b.Namespace
		}
		if a.Name != b.Name {
			return a.Name < b.Name
		}
		return a.Kind < b.Kind
	})
}

// Gateways are the "namespace/name" of the Gateways the route's parentRefs
// name, each once, sorted; withStatus adds those whose entry of this
// controller its status still has (so that a Gateway it left clears it).
func (r *Route) Gateways(withStatus bool) []string {
	out := r.named()
	if !withStatus {
		return out
	}
	for _, p := range r.Parents {
		if p.ControllerName != ControllerName {
			continue
		}
		ns := r.Namespace
		if p.ParentRef.Namespace != nil {
			ns = string(*p.ParentRef.Namespace)
		}
		out = append(out, ns+"/"+string(p.ParentRef.Name))
	}
	return dedupe(out)
}

// BackendServices are the "namespace/name" of the Services the route's
// backendRefs and mirrors name.
func (r *Route) BackendServices() []string {
	var out []string
	add := func(ref gatewayv1.BackendObjectReference) {
		if ref.Group != nil && *ref.Group != "" || ref.Kind != nil && *ref.Kind != "Service" {
			return
		}
		ns := r.Namespace
		if ref.Namespace != nil {
			ns = string(*ref.Namespace)
		}
		out = append(out, ns+"/"+string(ref.Name))
	}
	switch {
	case r.HTTP != nil:
		for _, rule := range r.HTTP.Spec.Rules {
			for _, b := range rule.BackendRefs {
				add(b.BackendObjectReference)
			}
			for _, f := range rule.Filters {
				if f.RequestMirror != nil {
					add(f.RequestMirror.BackendRef)
				}
			}
		}
	case r.GRPC != nil:
		for _, rule := range r.GRPC.Spec.Rules {
			for _, b := range rule.BackendRefs {
				add(b.BackendObjectReference)
			}
		}
	case r.TLS != nil:
		for _, rule := range r.TLS.Spec.Rules {
			for _, b := range rule.BackendRefs {
				add(b.BackendObjectReference)
			}
		}
	case r.TCP != nil:
		for _, rule := range r.TCP.Spec.Rules {
			for _, b := range rule.BackendRefs {
				add(b.BackendObjectReference)
			}
		}
	case r.UDP != nil:
		for _, rule := range r.UDP.Spec.Rules {
			for _, b := range rule.BackendRefs {
				add(b.BackendObjectReference)
			}
		}
	}
	return dedupe(out)
}
