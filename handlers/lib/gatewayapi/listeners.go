package gatewayapi

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// listener is one of a Gateway's listeners as resolved: what it accepts,
// what does not resolve, what it conflicts with.
type listener struct {
	spec gatewayv1.Listener
	// kinds are the route kinds it accepts (status.listeners[].supportedKinds).
	kinds []gatewayv1.RouteGroupKind
	// notAccepted, notResolved and conflict, when set, say what is wrong:
	// a listener with any of them is not programmed.
	notAccepted, notResolved, conflict *unresolved
	// certificate is an HTTPS listener's certificateRefs Secret; nil for
	// the device's own ts.net certificate.
	certificate *corev1.Secret
	// awaitingSecret says the certificateRefs Secret does not exist yet.
	awaitingSecret bool
	// attached counts the routes attached to it.
	attached int32
}

// valid reports whether the listener is programmed into the proxy.
func (l *listener) valid() bool {
	return l.notAccepted == nil && l.notResolved == nil && l.conflict == nil
}

// attachable reports whether routes attach to the listener: it is accepted
// and has no conflict. A listener whose references do not resolve (a
// missing certificate) takes routes and counts them in attachedRoutes, as
// the API asks, though it is not programmed.
func (l *listener) attachable() bool {
	return l.notAccepted == nil && l.conflict == nil
}

// defaultKinds are the route kinds a protocol takes when allowedRoutes.kinds
// is empty: all it can serve.
func defaultKinds(p gatewayv1.ProtocolType) []string {
	switch p {
	case gatewayv1.HTTPProtocolType, gatewayv1.HTTPSProtocolType:
		return []string{KindHTTPRoute, KindGRPCRoute}
	case gatewayv1.TLSProtocolType:
		return []string{KindTLSRoute}
	case gatewayv1.TCPProtocolType:
		return []string{KindTCPRoute}
	case gatewayv1.UDPProtocolType:
		return []string{KindUDPRoute}
	}
	return nil
}

// resolveListeners checks each listener of gw on its own (protocol, TLS
// mode, certificate, route kinds), then the listeners sharing a port
// against each other.
func resolveListeners(gw *gatewayv1.Gateway, grants []gatewayv1.ReferenceGrant, look Lookups) ([]*listener, error) {
	out := make([]*listener, len(gw.Spec.Listeners))
	for i, spec := range gw.Spec.Listeners {
		l := &listener{spec: spec}
		out[i] = l
		if err := l.resolve(gw, grants, look); err != nil {
			return nil, err
		}
	}
	markConflicts(out)
	return out, nil
}

func (l *listener) resolve(gw *gatewayv1.Gateway, grants []gatewayv1.ReferenceGrant, look Lookups) error {
	proto := l.spec.Protocol
	serves := defaultKinds(proto)
	if serves == nil {
		l.notAccepted = &unresolved{string(gatewayv1.ListenerReasonUnsupportedProtocol),
			fmt.Sprintf("protocol %q is not supported (HTTP, HTTPS, TLS, TCP and UDP are)", proto)}
	}
	l.kinds, l.notResolved = allowedKinds(l.spec.AllowedRoutes, serves)
	tlsCfg := l.spec.TLS
	switch proto {
	case gatewayv1.HTTPSProtocolType:
		if tlsCfg != nil && tlsCfg.Mode != nil && *tlsCfg.Mode != gatewayv1.TLSModeTerminate {
			l.notAccepted = &unresolved{string(gatewayv1.ListenerReasonUnsupportedValue), "an HTTPS listener terminates TLS: tls.mode must be Terminate"}
			return nil
		}
		if tlsCfg == nil || len(tlsCfg.CertificateRefs) == 0 {
			return nil // the device's own ts.net certificate
		}
		secret, bad, missing, err := resolveCertificate(gw, tlsCfg.CertificateRefs[0], grants, look)
		if err != nil {
			return err
		}
		l.certificate, l.awaitingSecret = secret, missing
		if bad != nil && l.notResolved == nil {
			l.notResolved = bad
		}
	case gatewayv1.TLSProtocolType:
		if tlsCfg == nil || tlsCfg.Mode == nil || *tlsCfg.Mode != gatewayv1.TLSModePassthrough {
			l.notAccepted = &unresolved{string(gatewayv1.ListenerReasonUnsupportedValue), "a TLS listener passes TLS through: tls.mode must be Passthrough (Terminate is not supported)"}
			// It takes no route kind: the suite's
			// TLSRouteListenerTerminateNotSupported asks for an empty
			// supportedKinds.
			l.kinds = nil
		}
	}
	return nil
}

// allowedKinds is the listener's supportedKinds: allowedRoutes.kinds that
// the protocol serves (all it serves when none are listed), and, when a
// listed kind is not served, InvalidRouteKinds.
func allowedKinds(allowed *gatewayv1.AllowedRoutes, serves []string) ([]gatewayv1.RouteGroupKind, *unresolved) {
	group := gatewayv1.Group(Group)
	if allowed == nil || len(allowed.Kinds) == 0 {
		out := make([]gatewayv1.RouteGroupKind, 0, len(serves))
		for _, k := range serves {
			out = append(out, gatewayv1.RouteGroupKind{Group: &group, Kind: gatewayv1.Kind(k)})
		}
		return out, nil
	}
	out := []gatewayv1.RouteGroupKind{}
	var bad []string
	for _, k := range allowed.Kinds {
		ok := (k.Group == nil || *k.Group == group) && contains(serves, string(k.Kind))
		if ok {
			out = append(out, gatewayv1.RouteGroupKind{Group: &group, Kind: k.Kind})
		} else {
			g := Group
			if k.Group != nil {
				g = string(*k.Group)
			}
			bad = append(bad, g+"/"+string(k.Kind))
		}
	}
	if bad != nil {
		return out, &unresolved{string(gatewayv1.ListenerReasonInvalidRouteKinds),
			fmt.Sprintf("route kinds not supported on this listener: %s", strings.Join(bad, ", "))}
	}
	return out, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// transport is the transport a protocol listens on: listeners of UDP and of
// the TCP-based protocols never conflict over a port number.
func transport(p gatewayv1.ProtocolType) string {
	if p == gatewayv1.UDPProtocolType {
		return "udp"
	}
	return "tcp"
}

// markConflicts marks listeners that cannot share their port: different
// protocols on one transport (ProtocolConflict), or the same protocol and
// hostname, where only HTTP, HTTPS and TLS tell listeners apart by
// hostname (HostnameConflict).
func markConflicts(ls []*listener) {
	byPort := map[string][]*listener{}
	for _, l := range ls {
		if l.notAccepted != nil {
			continue
		}
		key := fmt.Sprintf("%s/%d", transport(l.spec.Protocol), l.spec.Port)
		byPort[key] = append(byPort[key], l)
	}
	for _, group := range byPort {
		protocols := map[gatewayv1.ProtocolType]bool{}
		for _, l := range group {
			protocols[l.spec.Protocol] = true
		}
		if len(protocols) > 1 {
			for _, l := range group {
				l.conflict = &unresolved{string(gatewayv1.ListenerReasonProtocolConflict),
					fmt.Sprintf("another listener uses port %d with another protocol", l.spec.Port)}
			}
			continue
		}
		hostnames := map[string]int{}
		for _, l := range group {
			hostnames[hostnameOf(l.spec.Hostname)]++
		}
		for _, l := range group {
			p := l.spec.Protocol
			byName := p == gatewayv1.HTTPProtocolType || p == gatewayv1.HTTPSProtocolType || p == gatewayv1.TLSProtocolType
			switch {
			case !byName && len(group) > 1:
				l.conflict = &unresolved{string(gatewayv1.ListenerReasonProtocolConflict),
					fmt.Sprintf("another %s listener uses port %d", p, l.spec.Port)}
			case byName && hostnames[hostnameOf(l.spec.Hostname)] > 1:
				l.conflict = &unresolved{string(gatewayv1.ListenerReasonHostnameConflict),
					fmt.Sprintf("another listener on port %d has hostname %q", l.spec.Port, hostnameOf(l.spec.Hostname))}
			}
		}
	}
}

func hostnameOf(h *gatewayv1.Hostname) string {
	if h == nil {
		return ""
	}
	return strings.ToLower(string(*h))
}
