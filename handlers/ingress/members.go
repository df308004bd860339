package ingress

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"

	"github.com/tailplane/tailplane/handlers/lib/groupmember"
	"github.com/tailplane/tailplane/handlers/lib/ingressroutes"
	"github.com/tailplane/tailplane/handlers/lib/proxyset"
	"github.com/tailplane/tailplane/handlers/lib/settings"
	"github.com/tailplane/tailplane/handlers/lib/tsservice"
	"github.com/tailplane/tailplane/proxy/config"
)

// Names of Ingresses served by an ingress ProxyGroup (members.go,
// members_apply.go), the official ones unless said otherwise.
const (
	// FinalizerProxyGroup holds an Ingress of a ProxyGroup until its
	// Tailscale Service and certificate Secret are gone.
	FinalizerProxyGroup = "tailscale.com/ingress-pg-finalizer"
	// reasonFunnelIgnored (Tailplane's) says Funnel is not offered on a
	// ProxyGroup Ingress, as in the official operator, which ignores it
	// silently.
	reasonFunnelIgnored = "FunnelNotSupported"
	// indexGroupMembers indexes the members by ProxyGroup name.
	indexGroupMembers = "proxygroup-ingresses"
)

// GroupMember renders an Ingress of a ProxyGroup as the Tailscale Service
// that every replica of the group hosts, with problems to post (backends
// that do not resolve, ignored settings) while it is still served. The
// error is why it cannot be served (the official messages where there are
// some).
func GroupMember(ing *networkingv1.Ingress, s settings.Settings, lookup ingressroutes.ServiceLookup) (*groupmember.ServiceMember, []ingressroutes.Problem, error) {
	m := &groupmember.ServiceMember{Kind: "Ingress", Namespace: ing.Namespace, Name: ing.Name, UID: ing.UID,
		Group: ing.Annotations[groupmember.AnnotationProxyGroup]}
	if len(ing.Spec.TLS) > 1 {
		//lint:ignore ST1005 the official operator's condition message, capitalized as users see it
		return nil, nil, fmt.Errorf("Ingress contains invalid TLS block %v: only a single TLS entry is allowed", ing.Spec.TLS)
	}
	if len(ing.Spec.TLS) == 1 && len(ing.Spec.TLS[0].Hosts) > 1 {
		//lint:ignore ST1005 the official operator's condition message, capitalized as users see it
		return nil, nil, fmt.Errorf("Ingress contains invalid TLS block %v: only a single host is allowed", ing.Spec.TLS[0])
	}
	var err error
	if m.Hostname, err = Hostname(ing); err != nil {
		return nil, nil, err
	}
	if m.Tags, err = proxyset.Tags(ing.Annotations, s.ProxyTags); err != nil {
		return nil, nil, err
	}
	l7, problems, err := ingressroutes.L7(ing, lookup)
	if err != nil {
		return nil, nil, err
	}
	l7.TLS = config.TLS{Mode: config.TLSShared, SecretName: tsservice.CertSecretName(m.Hostname)}
	l7.HTTPRedirect = HTTPRedirect(ing)
	if ing.Annotations[AnnotationHTTPEndpoint] == "enabled" {
		if l7.HTTPRedirect {
			problems = append(problems, ingressroutes.Problem{Type: corev1.EventTypeWarning, Reason: ReasonInvalidIngress,
				Message: "tailscale.com/http-redirect is ignored because tailscale.com/http-endpoint is enabled"})
		}
		l7.HTTPRedirect, l7.PlainHTTP = false, true
	}
	if Funnel(ing) {
		problems = append(problems, ingressroutes.Problem{Type: corev1.EventTypeWarning, Reason: reasonFunnelIgnored,
			Message: "tailscale.com/funnel is not supported on ProxyGroup Ingresses and is ignored; use a dedicated proxy (remove tailscale.com/proxy-group) for Funnel"})
	}
	m.Ports = []string{"tcp:443"}
	if l7.HTTPRedirect || l7.PlainHTTP {
		m.Ports = append(m.Ports, "tcp:80")
	}
	m.Service = config.Service{Name: m.ServiceName(), L7: l7}
	return m, problems, nil
}

// groupMemberStatus is status.loadBalancer.ingress of a member: the
// service's MagicDNS name with its ports once a replica advertises it (m
// nil: none).
func groupMemberStatus(m *groupmember.ServiceMember, st groupmember.Status) []networkingv1.IngressLoadBalancerIngress {
	if m == nil || st.Advertising == 0 || st.DNSName == "" {
		return nil
	}
	ports := []networkingv1.IngressPortStatus{{Port: 443, Protocol: corev1.ProtocolTCP}}
	if len(m.Ports) > 1 {
		ports = append(ports, networkingv1.IngressPortStatus{Port: 80, Protocol: corev1.ProtocolTCP})
	}
	return []networkingv1.IngressLoadBalancerIngress{{Hostname: st.DNSName, Ports: ports}}
}
