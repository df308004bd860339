package ingress

import (
	"fmt"
	"strconv"
	"strings"

	networkingv1 "k8s.io/api/networking/v1"

	"github.com/tailplane/tailplane/handlers/lib/ingressroutes"
	"github.com/tailplane/tailplane/handlers/lib/proxyset"
)

// Annotations with the official operator's names.
const (
	AnnotationHTTPRedirect = "tailscale.com/http-redirect"
	AnnotationFunnel       = "tailscale.com/funnel"
	AnnotationProxyGroup   = "tailscale.com/proxy-group"
)

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

// Hostname returns the Ingress's tailnet hostname: the first label of
// tls[0].hosts[0], else <namespace>-<name>-ingress (the official default).
// It must be a DNS label.
func Hostname(ing *networkingv1.Ingress) (string, error) {
	h := ing.Namespace + "-" + ing.Name + "-ingress"
	source := "the default <namespace>-<name>-ingress; set spec.tls[0].hosts[0] to override"
	if host := ingressroutes.TLSHost(ing); host != "" {
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

// TLSSecretName is the name of the copy, in the operator namespace, of the
// Secret named in tls[0].secretName. The apply step keeps the copy in sync
// with the user's Secret (a custom domain's certificate, from cert-manager for
// example); the proxy serves it.
func TLSSecretName(ing *networkingv1.Ingress) string {
	return Parent(ing).Names().Base + "-tls"
}
