package ingress

import (
	networkingv1 "k8s.io/api/networking/v1"

	"github.com/tailplane/tailplane/internal/tailnet"
)

// ReasonFunnelNotAllowed (Tailplane's; the official operator has no such
// Event) says an Ingress asks for Funnel on a control server without it
// (Headscale): it is served on the tailnet only.
const ReasonFunnelNotAllowed = "FunnelNotAllowed"

// FunnelRefused is the message for an Ingress with tailscale.com/funnel on
// a control server without Funnel, "" otherwise. Such an Ingress is served
// without Funnel, since a proxy asked for a Funnel listener control cannot
// give would serve nothing publicly anyway.
func FunnelRefused(ing *networkingv1.Ingress, be tailnet.Backend) string {
	if !Funnel(ing) || tailnet.Supports(be, tailnet.FeatureFunnel) {
		return ""
	}
	return tailnet.Unsupported(be, AnnotationFunnel+` "true"`, tailnet.FeatureFunnel) +
		": the Ingress is served on the tailnet only, not on the internet; remove the annotation to silence this"
}
