package ingress

import (
	networkingv1 "k8s.io/api/networking/v1"

	"github.com/tailplane/tailplane/handlers/lib/ingressroutes"
	"github.com/tailplane/tailplane/internal/tailnet"
	"github.com/tailplane/tailplane/proxy/config"
)

// AnnotationHTTPEndpoint "enabled" serves the routes as plain HTTP on port
// 80 (the official annotation of ProxyGroup Ingresses). A dedicated proxy
// honours it only on a control server that issues no certificates
// (Headscale), for an Ingress without tls[0].secretName: there it is the
// documented way to serve without HTTPS.
const AnnotationHTTPEndpoint = "tailscale.com/http-endpoint"

// HTTPEndpoint reports whether tailscale.com/http-endpoint is "enabled".
func HTTPEndpoint(ing *networkingv1.Ingress) bool {
	return ing.Annotations[AnnotationHTTPEndpoint] == "enabled"
}

// Certificates decides how ing serves on a control server: refused (a
// message naming the missing feature and both ways out), plain HTTP only
// (plain), or as usual. Only a backend without FeatureCertificates changes
// anything, and only for an Ingress without a certificate of its own.
func Certificates(ing *networkingv1.Ingress, be tailnet.Backend) (plain bool, refused string) {
	if ingressroutes.CustomTLS(ing) || tailnet.Supports(be, tailnet.FeatureCertificates) {
		return false, ""
	}
	if HTTPEndpoint(ing) {
		return true, ""
	}
	return false, tailnet.Unsupported(be, "an Ingress without tls[0].secretName", tailnet.FeatureCertificates) +
		": put a kubernetes.io/tls Secret's name in tls[0].secretName to serve HTTPS with your certificate, " +
		"or set the annotation " + AnnotationHTTPEndpoint + `: "enabled" to serve plain HTTP on port 80 (tailnet only)`
}

// servePlainHTTP turns an L7 config into plain HTTP on port 80 with no
// HTTPS listener.
func servePlainHTTP(l7 *config.L7) {
	l7.TLS = config.TLS{Mode: config.TLSNone}
	l7.HTTPRedirect, l7.PlainHTTP = false, true
}
