package gatewayapi

import (
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/tailplane/tailplane/proxy/config"
)

// Inputs are what Render needs besides the Gateway: the routes that name
// it, the ReferenceGrants, and how to read the rest.
type Inputs struct {
	// Routes are the routes with a parentRef naming the Gateway, and those
	// whose status.parents still has an entry of ours for it (which
	// Render drops).
	Routes []*Route
	// Grants are the cluster's ReferenceGrants.
	Grants []gatewayv1.ReferenceGrant
	// Lookups read Services, Secrets, namespaces and RoutingPlugins.
	Lookups Lookups
	// CertificateName names the copy, in the operator namespace, of a
	// listener's certificate Secret, which the proxy reads.
	CertificateName func(listener string) string
	// Funnel exposes the HTTPS listeners on a port Funnel offers (443,
	// 8443, 10000) to the internet: the Gateway asks for it and its
	// tailnet offers it.
	Funnel bool
	// SharedCertificate, for a Gateway of a ProxyGroup, is the Secret of
	// its Tailscale Service's shared certificate, which its HTTPS
	// listeners serve; certificateRefs are not supported there yet.
	SharedCertificate string
	// NoCertificates, when set, says the tailnet's control server issues
	// no certificates: an HTTPS listener without certificateRefs is not
	// accepted, with this message.
	NoCertificates string
}

// Result is a Gateway resolved.
type Result struct {
	// Config is the proxy's gateway section: the valid listeners with
	// their routes. Nil when no listener is valid.
	Config *config.Gateway
	// Certificates are the Secrets to copy for the proxy, by copy name.
	Certificates map[string]*corev1.Secret
	// PluginSecrets are the Secrets of the RoutingPlugins the routes'
	// ExtensionRef filters name.
	PluginSecrets []string
	// Parents are, by Route.Key, the route's status.parents entries of
	// this controller for the Gateway: one per parentRef naming it, none
	// for a route that no longer names it.
	Parents map[string][]gatewayv1.RouteParentStatus
	// Refused, when set, is why the whole Gateway is not accepted
	// (Accepted False with RefusedReason).
	Refused, RefusedReason string
	// AwaitingSecrets says a listener names a certificate Secret that
	// does not exist yet. The operator may only get Secrets outside its
	// namespace, not watch them, so it has to look again.
	AwaitingSecrets bool

	listeners []*listener
}

// Render resolves gw against its routes: the proxy's config, the
// certificates to copy, and the routes' statuses. It reads only through
// in.Lookups.
func Render(gw *gatewayv1.Gateway, in Inputs) (*Result, error) {
	res := &Result{Certificates: map[string]*corev1.Secret{}, Parents: map[string][]gatewayv1.RouteParentStatus{}}
	if len(gw.Spec.Addresses) > 0 {
		res.Refused, res.RefusedReason = "spec.addresses is not supported: a Gateway's addresses are its device's tailnet addresses", string(gatewayv1.GatewayReasonUnsupportedAddress)
	}
	ls, err := resolveListeners(gw, in.Grants, in.Lookups)
	if err != nil {
		return nil, err
	}
	for _, l := range ls {
		if in.SharedCertificate != "" && l.spec.TLS != nil && len(l.spec.TLS.CertificateRefs) > 0 && l.notAccepted == nil {
			l.notAccepted = &unresolved{string(gatewayv1.ListenerReasonUnsupportedValue),
				"certificateRefs are not supported on a Gateway served by a ProxyGroup yet: its HTTPS listeners serve the Tailscale Service's certificate; remove them, or serve the Gateway on a device of its own"}
			l.certificate = nil
		}
		if in.NoCertificates != "" && l.notAccepted == nil && l.spec.Protocol == gatewayv1.HTTPSProtocolType && l.certificate == nil && l.notResolved == nil {
			l.notAccepted = &unresolved{string(gatewayv1.ListenerReasonUnsupportedValue), in.NoCertificates}
		}
	}
	res.listeners = ls
	for _, l := range ls {
		res.AwaitingSecrets = res.AwaitingSecrets || l.awaitingSecret
	}
	routes := append([]*Route(nil), in.Routes...)
	SortRoutes(routes)
	entries := map[*listener]*config.Listener{}
	for _, l := range ls {
		if l.valid() {
			entries[l] = listenerConfig(l, in.CertificateName)
			entries[l].Funnel = in.Funnel && FunnelPort(l.spec)
			if in.SharedCertificate != "" && entries[l].TLS != nil {
				entries[l].TLS = &config.TLS{Mode: config.TLSShared, SecretName: in.SharedCertificate}
			}
			if l.certificate != nil {
				res.Certificates[in.CertificateName(string(l.spec.Name))] = l.certificate
			}
		}
	}
	for _, r := range routes {
		parents, err := attach(r, gw, ls, in.Lookups.NamespaceLabels)
		if err != nil {
			return nil, err
		}
		if len(parents) == 0 {
			res.Parents[r.Key()] = nil
			continue
		}
		rs, err := translate(r, in.Grants, in.Lookups)
		if err != nil {
			return nil, err
		}
		for _, p := range parents {
			if p.notAccepted == nil && len(rs.unsupported) == 0 {
				program(entries, p.attached, rs)
				res.PluginSecrets = append(res.PluginSecrets, rs.pluginSecrets...)
			}
			res.Parents[r.Key()] = append(res.Parents[r.Key()], parentStatus(r, gw, p, rs))
		}
	}
	if res.Refused == "" {
		res.Config = gatewayConfig(ls, entries)
	}
	sort.Strings(res.PluginSecrets)
	res.PluginSecrets = dedupe(res.PluginSecrets)
	return res, nil
}

// FunnelPort reports whether Funnel can expose the listener: HTTPS on one
// of the ports Funnel offers.
func FunnelPort(l gatewayv1.Listener) bool {
	return l.Protocol == gatewayv1.HTTPSProtocolType && (l.Port == 443 || l.Port == 8443 || l.Port == 10000)
}

// listenerConfig is a valid listener's proxy entry, without routes.
func listenerConfig(l *listener, certName func(string) string) *config.Listener {
	c := &config.Listener{Name: string(l.spec.Name), Port: int(l.spec.Port),
		Protocol: config.ListenerProtocol(l.spec.Protocol), Hostname: hostnameOf(l.spec.Hostname)}
	if l.spec.Protocol == gatewayv1.HTTPSProtocolType {
		c.TLS = &config.TLS{Mode: config.TLSTailscaleCert}
		if l.certificate != nil {
			c.TLS = &config.TLS{Mode: config.TLSSecret, SecretName: certName(string(l.spec.Name))}
		}
	}
	return c
}

// program adds a route's rules to the listeners it attached to, with the
// hostnames it answers there.
func program(entries map[*listener]*config.Listener, attached []attachment, rs *rules) {
	for _, a := range attached {
		c := entries[a.listener]
		if c == nil {
			continue // attached, but not programmed: its references do not resolve
		}
		switch c.Protocol {
		case config.ListenerHTTP, config.ListenerHTTPS:
			for _, e := range rs.http {
				e.Hostnames = a.hostnames
				c.HTTPRoutes = append(c.HTTPRoutes, e)
			}
		case config.ListenerTLS:
			for _, t := range rs.tls {
				t.Hostnames = a.hostnames
				c.TLSRoutes = append(c.TLSRoutes, t)
			}
		case config.ListenerTCP, config.ListenerUDP:
			if c.Backends == nil {
				c.Backends = rs.backends // the oldest route's, as precedence has it
			}
		}
	}
}

// gatewayConfig is the proxy's section: the valid listeners in the
// Gateway's order, HTTP entries in precedence order. Nil when none is valid.
func gatewayConfig(ls []*listener, entries map[*listener]*config.Listener) *config.Gateway {
	out := &config.Gateway{}
	for _, l := range ls {
		if c := entries[l]; c != nil {
			sortHTTP(c.HTTPRoutes)
			out.Listeners = append(out.Listeners, *c)
		}
	}
	if len(out.Listeners) == 0 {
		return nil
	}
	return out
}

// parentStatus is a route's status.parents entry for parentRef p.
func parentStatus(r *Route, gw *gatewayv1.Gateway, p parentResult, rs *rules) gatewayv1.RouteParentStatus {
	accepted := metav1.Condition{Type: string(gatewayv1.RouteConditionAccepted), Status: metav1.ConditionTrue,
		Reason: string(gatewayv1.RouteReasonAccepted), Message: fmt.Sprintf("attached to Gateway %s/%s", gw.Namespace, gw.Name)}
	switch {
	case p.notAccepted != nil:
		accepted.Status, accepted.Reason, accepted.Message = metav1.ConditionFalse, p.notAccepted.Reason, p.notAccepted.Message
	case len(rs.unsupported) > 0:
		accepted.Status, accepted.Reason, accepted.Message = metav1.ConditionFalse, string(gatewayv1.RouteReasonUnsupportedValue), strings.Join(rs.unsupported, "; ")
	}
	resolved := metav1.Condition{Type: string(gatewayv1.RouteConditionResolvedRefs), Status: metav1.ConditionTrue,
		Reason: string(gatewayv1.RouteReasonResolvedRefs), Message: "every reference resolved"}
	if len(rs.unresolved) > 0 {
		msgs := make([]string, len(rs.unresolved))
		for i, u := range rs.unresolved {
			msgs[i] = u.Message
		}
		resolved.Status, resolved.Reason, resolved.Message = metav1.ConditionFalse, rs.unresolved[0].Reason, strings.Join(msgs, "; ")
	}
	for _, c := range []*metav1.Condition{&accepted, &resolved} {
		c.ObservedGeneration = r.Generation
	}
	return gatewayv1.RouteParentStatus{ParentRef: p.ref, ControllerName: ControllerName,
		Conditions: []metav1.Condition{accepted, resolved}}
}
