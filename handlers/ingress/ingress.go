package ingress

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/tailplane/tailplane/handlers/lib/proxyset"
)

// Annotations with the official operator's names.
const (
	AnnotationHTTPRedirect = "tailscale.com/http-redirect"
	AnnotationFunnel       = "tailscale.com/funnel"
	AnnotationProxyGroup   = "tailscale.com/proxy-group"
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

// IsOurs reports whether ing is served by a dedicated proxy of this
// operator: its ingressClassName is exactly className, and it does not ask
// for a ProxyGroup. Ingresses without a class are never ours (the default
// IngressClass mechanism is not honoured, as in the official operator).
func IsOurs(ing *networkingv1.Ingress, className string) bool {
	if ing.Spec.IngressClassName == nil || *ing.Spec.IngressClassName != className {
		return false
	}
	_, pg := ing.Annotations[AnnotationProxyGroup]
	return !pg
}

// tlsHost is tls[0].hosts[0], or "".
func tlsHost(ing *networkingv1.Ingress) string {
	if len(ing.Spec.TLS) > 0 && len(ing.Spec.TLS[0].Hosts) > 0 {
		return ing.Spec.TLS[0].Hosts[0]
	}
	return ""
}

// Hostname returns the Ingress's tailnet hostname: the first label of
// tls[0].hosts[0], else <namespace>-<name>-ingress (the official default).
// It must be a DNS label.
func Hostname(ing *networkingv1.Ingress) (string, error) {
	h := ing.Namespace + "-" + ing.Name + "-ingress"
	source := "the default <namespace>-<name>-ingress; set spec.tls[0].hosts[0] to override"
	if host := tlsHost(ing); host != "" {
		h, _, _ = strings.Cut(host, ".")
		source = fmt.Sprintf("the first label of spec.tls[0].hosts[0] %q", host)
	}
	if err := proxyset.ValidHostname(h); err != nil {
		return "", fmt.Errorf("invalid Tailscale hostname %q (%s): %s", h, source, err)
	}
	return strings.ToLower(h), nil
}

// boolAnnotation reads a boolean annotation the way the official operator
// does (true, 1, t, TRUE, ...); anything else is false.
func boolAnnotation(ing *networkingv1.Ingress, key string) bool {
	b, err := strconv.ParseBool(ing.Annotations[key])
	return err == nil && b
}

// HTTPRedirect reports whether tailscale.com/http-redirect is on.
func HTTPRedirect(ing *networkingv1.Ingress) bool { return boolAnnotation(ing, AnnotationHTTPRedirect) }

// Funnel reports whether tailscale.com/funnel is on.
func Funnel(ing *networkingv1.Ingress) bool { return boolAnnotation(ing, AnnotationFunnel) }

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
	for _, name := range extraServices(ing) {
		add(&networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: name}})
	}
	return out
}

// TLSSecretName is the name of the copy, in the operator namespace, of the
// Secret named in tls[0].secretName. The apply step keeps the copy in sync
// with the user's Secret (a custom domain's certificate, from cert-manager for
// example); the proxy serves it.
func TLSSecretName(ing *networkingv1.Ingress) string {
	return Parent(ing).Names().Base + "-tls"
}

// customTLS reports whether the Ingress brings its own certificate (beyond
// the official operator, which ignores secretName).
func customTLS(ing *networkingv1.Ingress) bool {
	return len(ing.Spec.TLS) > 0 && ing.Spec.TLS[0].SecretName != ""
}
