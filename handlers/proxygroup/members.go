package proxygroup

import (
	"fmt"
	"net"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/tailplane/tailplane/handlers/ingress"
	"github.com/tailplane/tailplane/handlers/lib/proxyset"
	"github.com/tailplane/tailplane/handlers/lib/settings"
	"github.com/tailplane/tailplane/handlers/lib/tsservice"
	"github.com/tailplane/tailplane/handlers/service"
	"github.com/tailplane/tailplane/internal/tailnet"
	"github.com/tailplane/tailplane/proxy/config"
)

// Annotations, finalizers and reasons with the official operator's names.
const (
	AnnotationProxyGroup = "tailscale.com/proxy-group"
	// annotationHTTPEndpoint "enabled" also serves plain HTTP on port 80
	// (ProxyGroup Ingresses; dedicated ones only on Headscale, see ingress).
	annotationHTTPEndpoint = ingress.AnnotationHTTPEndpoint

	FinalizerIngress = "tailscale.com/ingress-pg-finalizer"
	finalizerService = "tailscale.com/service-pg-finalizer"

	ReasonProxyGroupNotFound   = "ProxyGroupNotFound"
	reasonInvalidIngressConfig = "InvalidIngressConfiguration"
	ReasonIngressSvcInvalid    = "IngressSvcInvalid"
	reasonSvcInvalid           = ReasonIngressSvcInvalid
	ReasonInvalidTailscaleSvc  = "InvalidTailscaleService"
	// reasonFunnelIgnored (Tailplane's) says Funnel is not offered on a
	// ProxyGroup Ingress, as in the official operator, which ignores it
	// silently.
	reasonFunnelIgnored = "FunnelNotSupported"
	// ReasonNameShadowed (Tailplane's) warns that a device has the MagicDNS
	// name a member's Tailscale Service wants.
	ReasonNameShadowed = "HostnameInUseByDevice"

	// Service conditions of ProxyGroup Services.
	ConditionSvcValid          = "TailscaleIngressSvcValid"
	ConditionSvcConfigured     = "TailscaleIngressSvcConfigured"
	ReasonSvcConfigured        = "IngressSvcConfigured"
	ReasonSvcNoBackends        = "IngressSvcNoBackendsConfigured"
	messageBackendsAdvertising = "%d/%d proxy backends ready and advertising"
)

// member is an Ingress or a Service served by an ingress ProxyGroup as the
// Tailscale Service svc:<Hostname>.
type member struct {
	Kind, Namespace, Name string
	UID                   types.UID
	// Group is the ProxyGroup's name.
	Group string
	// Hostname is the Tailscale Service's DNS label.
	Hostname string
	// Tags are the Tailscale Service's tags.
	Tags []string
	// Ports are the ports the service serves, in the API's "tcp:443" form.
	Ports []string
	// Service is what the group's replicas host.
	Service config.Service
	// PluginSecrets are the module copies of Service.Plugins, which the
	// replicas must be allowed to read.
	PluginSecrets []string
	// Problems are Events to post (backends that do not resolve, ignored
	// settings); the member is still served.
	Problems []ingress.Problem
}

// serviceName is the Tailscale Service's name, "svc:<hostname>".
func (m *member) serviceName() string { return tsservice.Name(m.Hostname) }

// key is "<Kind>/<namespace>/<name>".
func (m *member) key() string { return m.Kind + "/" + m.Namespace + "/" + m.Name }

// ingressMember renders an Ingress of a ProxyGroup. The error is why it
// cannot be served (the official messages where there are some).
func ingressMember(ing *networkingv1.Ingress, s settings.Settings, lookup ingress.ServiceLookup) (*member, error) {
	m := &member{Kind: "Ingress", Namespace: ing.Namespace, Name: ing.Name, UID: ing.UID, Group: ing.Annotations[AnnotationProxyGroup]}
	if len(ing.Spec.TLS) > 1 {
		//lint:ignore ST1005 the official operator's condition message, capitalized as users see it
		return nil, fmt.Errorf("Ingress contains invalid TLS block %v: only a single TLS entry is allowed", ing.Spec.TLS)
	}
	if len(ing.Spec.TLS) == 1 && len(ing.Spec.TLS[0].Hosts) > 1 {
		//lint:ignore ST1005 the official operator's condition message, capitalized as users see it
		return nil, fmt.Errorf("Ingress contains invalid TLS block %v: only a single host is allowed", ing.Spec.TLS[0])
	}
	var err error
	if m.Hostname, err = ingress.Hostname(ing); err != nil {
		return nil, err
	}
	if m.Tags, err = proxyset.Tags(ing.Annotations, s.ProxyTags); err != nil {
		return nil, err
	}
	l7, problems, err := ingress.L7(ing, lookup)
	if err != nil {
		return nil, err
	}
	m.Problems = problems
	l7.TLS = config.TLS{Mode: config.TLSShared, SecretName: tsservice.CertSecretName(m.Hostname)}
	l7.HTTPRedirect = ingress.HTTPRedirect(ing)
	if ing.Annotations[annotationHTTPEndpoint] == "enabled" {
		if l7.HTTPRedirect {
			m.Problems = append(m.Problems, ingress.Problem{Type: corev1.EventTypeWarning, Reason: reasonInvalidIngressConfig,
				Message: "tailscale.com/http-redirect is ignored because tailscale.com/http-endpoint is enabled"})
		}
		l7.HTTPRedirect, l7.PlainHTTP = false, true
	}
	if ingress.Funnel(ing) {
		m.Problems = append(m.Problems, ingress.Problem{Type: corev1.EventTypeWarning, Reason: reasonFunnelIgnored,
			Message: "tailscale.com/funnel is not supported on ProxyGroup Ingresses and is ignored; use a dedicated proxy (remove tailscale.com/proxy-group) for Funnel"})
	}
	m.Ports = []string{"tcp:443"}
	if l7.HTTPRedirect || l7.PlainHTTP {
		m.Ports = append(m.Ports, "tcp:80")
	}
	m.Service = config.Service{Name: m.serviceName(), L7: l7}
	return m, nil
}

// serviceMember renders a LoadBalancer or exposed Service of a ProxyGroup:
// its ports forwarded to its ClusterIP.
func serviceMember(svc *corev1.Service, s settings.Settings) (*member, error) {
	m := &member{Kind: "Service", Namespace: svc.Namespace, Name: svc.Name, UID: svc.UID, Group: svc.Annotations[AnnotationProxyGroup]}
	if svc.Spec.Type == corev1.ServiceTypeExternalName {
		return nil, fmt.Errorf("invalid Service: ExternalName Services are not supported on ProxyGroups")
	}
	if problems := service.Validate(svc, s); len(problems) > 0 {
		return nil, fmt.Errorf("invalid Service: %s", strings.Join(problems, " "))
	}
	var err error
	if m.Hostname, err = service.Hostname(svc); err != nil {
		return nil, err
	}
	if m.Tags, err = proxyset.Tags(svc.Annotations, s.ProxyTags); err != nil {
		return nil, err
	}
	l4 := &config.L4{}
	for _, p := range svc.Spec.Ports {
		proto := config.TCP
		if p.Protocol == corev1.ProtocolUDP {
			proto = config.UDP
		} else if p.Protocol == corev1.ProtocolSCTP {
			return nil, fmt.Errorf("invalid Service: port %d: SCTP is not supported", p.Port)
		}
		l4.Ports = append(l4.Ports, config.PortMap{Protocol: proto, Port: int(p.Port),
			Target: net.JoinHostPort(svc.Spec.ClusterIP, strconv.Itoa(int(p.Port)))})
	}
	// As the official operator: the Tailscale Service of a Service member
	// does not restrict ports (the proxy listens on the Service's own), and
	// operators that co-own it write the same value.
	m.Ports = []string{portsNotValidated}
	if len(l4.Ports) == 0 {
		return nil, fmt.Errorf("invalid Service: it has no ports")
	}
	m.Service = config.Service{Name: m.serviceName(), L4: l4}
	return m, nil
}

// owner is m as the owner of its Tailscale Service.
func (m *member) owner() tsservice.Owner {
	return tsservice.Owner{Kind: m.Kind, Namespace: m.Namespace, Name: m.Name, UID: m.UID}
}

// desired is the Tailscale Service m wants, given the one that exists.
func (m *member) desired(existing *tailnet.Service, operatorID string) (tailnet.Service, error) {
	return tsservice.Desired(m.owner(), m.Hostname, m.Tags, m.Ports, existing, operatorID)
}

// portsNotValidated is the Tailscale Service ports value that accepts every
// port.
const portsNotValidated = "do-not-validate"

func sprintf(format string, args ...any) string { return fmt.Sprintf(format, args...) }

func isIPv4(s string) bool {
	ip := net.ParseIP(s)
	return ip != nil && ip.To4() != nil
}
