// Package ingressroutes renders an Ingress's routes for an L7 proxy: its
// rules and default backend (and the extra backends it offers routing
// plugins), resolved to their Services' ClusterIP addresses, as the routing
// section of the proxy config; and the problems to tell the user about
// (Events with the official operator's reasons). A dedicated proxy
// (handlers/ingress) and an ingress ProxyGroup's member (the same module's
// RegisterMember) serve the same routes.
//
// It is pure but for Lookup (a Service on the API server) and imports the
// Kubernetes API types, client-go and proxy/config only. Its tests are the
// ingress module's (handlers/ingress), on the seed's Ingress.
package ingressroutes

import (
	"context"
	"errors"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Event reasons, the official ones.
const (
	ReasonInvalidIngressBackend = "InvalidIngressBackend"
	ReasonPathUndefined         = "PathUndefined"
	ReasonNoValidBackends       = "NoValidBackends"
	// ReasonInvalidIngressConfiguration is the official reason for Ingress
	// settings the operator cannot honour (spec.tls beyond one entry with
	// one host).
	ReasonInvalidIngressConfiguration = "InvalidIngressConfiguration"
)

// Problem is something to tell the user about through an Event on the
// Ingress.
type Problem struct {
	// Type is corev1.EventTypeWarning or corev1.EventTypeNormal.
	Type string
	// Reason is one of the Reason* constants.
	Reason string
	// Message is the Event text.
	Message string
}

// ErrNoValidBackends means no rule or default backend could be served; no
// proxy is rendered.
var ErrNoValidBackends = errors.New("no valid backends")

// ServiceLookup finds a Service in the Ingress's namespace by name; it
// returns nil (and no error) when there is none. The handler backs it with an
// informer's index so that Ingresses are re-rendered when their backends
// change.
type ServiceLookup func(name string) (*corev1.Service, error)

// Lookup is the ServiceLookup of namespace on the API server.
func Lookup(ctx context.Context, kube kubernetes.Interface, namespace string) ServiceLookup {
	return func(name string) (*corev1.Service, error) {
		svc, err := kube.CoreV1().Services(namespace).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return svc, err
	}
}

// TLSHost is tls[0].hosts[0], or "".
func TLSHost(ing *networkingv1.Ingress) string {
	if len(ing.Spec.TLS) > 0 && len(ing.Spec.TLS[0].Hosts) > 0 {
		return ing.Spec.TLS[0].Hosts[0]
	}
	return ""
}

// CustomTLS reports whether the Ingress brings its own certificate (beyond
// the official operator, which ignores secretName).
func CustomTLS(ing *networkingv1.Ingress) bool {
	return len(ing.Spec.TLS) > 0 && ing.Spec.TLS[0].SecretName != ""
}

// BackendServices lists the names of the Services an Ingress refers to
// (rules, default backend and AnnotationExtraBackends), the keys of the
// handler's "Ingresses by backend Service" index.
func BackendServices(ing *networkingv1.Ingress) []string {
	seen := map[string]bool{}
	var out []string
	add := func(b *networkingv1.IngressBackend) {
		if b != nil && b.Service != nil && !seen[b.Service.Name] {
			seen[b.Service.Name] = true
			out = append(out, b.Service.Name)
		}
	}
	add(ing.Spec.DefaultBackend)
	for _, r := range ing.Spec.Rules {
		if r.HTTP == nil {
			continue
		}
		for i := range r.HTTP.Paths {
			add(&r.HTTP.Paths[i].Backend)
		}
	}
	for _, name := range ExtraServices(ing) {
		add(&networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: name}})
	}
	return out
}
