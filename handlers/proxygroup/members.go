package proxygroup

import (
	"encoding/json"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/tailplane/tailplane/handlers/ingress"
	"github.com/tailplane/tailplane/handlers/lib/proxyset"
	"github.com/tailplane/tailplane/handlers/lib/settings"
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
	// AnnotationOwnerReferences, on a Tailscale Service, names the
	// operators (and here, always, the object) it belongs to.
	AnnotationOwnerReferences = "tailscale.com/owner-references"

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
	ReasonSvcValid             = "IngressSvcValid"
	ReasonSvcConfigured        = "IngressSvcConfigured"
	ReasonSvcNoBackends        = "IngressSvcNoBackendsConfigured"
	messageBackendsAdvertising = "%d/%d proxy backends ready and advertising"
	serviceComment             = "This Tailscale Service is managed by the Tailplane operator, do not modify"
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
func (m *member) serviceName() string { return "svc:" + m.Hostname }

// key is "<Kind>/<namespace>/<name>".
func (m *member) key() string { return m.Kind + "/" + m.Namespace + "/" + m.Name }

// CertSecretName is the kubernetes.io/tls Secret, in the operator namespace,
// through which a group's replicas share the certificate of hostname's
// Tailscale Service.
func CertSecretName(hostname string) string { return "ts-svc-" + hostname + "-tls" }

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
	l7.TLS = config.TLS{Mode: config.TLSShared, SecretName: CertSecretName(m.Hostname)}
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
		m.Ports = append(m.Ports, strings.ToLower(string(proto))+":"+strconv.Itoa(int(p.Port)))
	}
	if len(l4.Ports) == 0 {
		return nil, fmt.Errorf("invalid Service: it has no ports")
	}
	m.Service = config.Service{Name: m.serviceName(), L4: l4}
	return m, nil
}

// ownerRef is one owner of a Tailscale Service, as recorded in
// AnnotationOwnerReferences.
type ownerRef struct {
	OperatorID string         `json:"operatorID,omitempty"`
	Resource   *ownerResource `json:"resource,omitempty"`
}

// ownerResource names the object that owns a Tailscale Service.
type ownerResource struct {
	Kind      string    `json:"kind,omitempty"`
	Name      string    `json:"name,omitempty"`
	Namespace string    `json:"namespace,omitempty"`
	UID       types.UID `json:"uid,omitempty"`
}

type ownerRefs struct {
	OwnerRefs []ownerRef `json:"ownerRefs"`
}

// owner is m's entry in the owner annotation.
func (m *member) owner(operatorID string) ownerRef {
	return ownerRef{OperatorID: operatorID, Resource: &ownerResource{Kind: m.Kind, Name: m.Name, Namespace: m.Namespace, UID: m.UID}}
}

// readOwners reads a Tailscale Service's owner annotation (nil when absent).
func readOwners(svc *tailnet.Service) ([]ownerRef, error) {
	raw := svc.Annotations[AnnotationOwnerReferences]
	if raw == "" {
		return nil, nil
	}
	var o ownerRefs
	if err := json.Unmarshal([]byte(raw), &o); err != nil {
		//lint:ignore ST1005 the official operator's condition message, capitalized as users see it
		return nil, fmt.Errorf("Tailscale Service %s: annotation %s is not valid JSON: %w", svc.Name, AnnotationOwnerReferences, err)
	}
	return o.OwnerRefs, nil
}

// desired is the Tailscale Service m wants, given the one that exists (nil
// when none): addresses and other owners' entries are kept. An existing
// service that m may not take (made by hand, or another object's) is an
// error: two objects never silently share a name.
func (m *member) desired(existing *tailnet.Service, operatorID string) (tailnet.Service, error) {
	want := tailnet.Service{Name: m.serviceName(), Comment: serviceComment, Tags: m.Tags, Ports: m.Ports,
		Annotations: map[string]string{}}
	mine := m.owner(operatorID)
	owners := []ownerRef{mine}
	if existing != nil {
		old, err := readOwners(existing)
		if err != nil {
			return want, err
		}
		if len(old) == 0 {
			//lint:ignore ST1005 the official operator's condition message, capitalized as users see it
			return want, fmt.Errorf("Tailscale Service %s already exists and is not managed by a Kubernetes operator; delete it or choose another hostname", want.Name)
		}
		for _, o := range old {
			switch {
			case o.OperatorID == operatorID && o.Resource != nil && o.Resource.Kind == m.Kind && o.Resource.Namespace == m.Namespace && o.Resource.Name == m.Name:
				// Ours, perhaps from an earlier object of the same name.
			case o.OperatorID == operatorID:
				//lint:ignore ST1005 the official operator's condition message, capitalized as users see it
				return want, fmt.Errorf("Tailscale Service %s is already used by %s; choose another hostname", want.Name, describe(o.Resource))
			default:
				//lint:ignore ST1005 the official operator's condition message, capitalized as users see it
				return want, fmt.Errorf("Tailscale Service %s is already used by another operator (device %s); choose another hostname", want.Name, o.OperatorID)
			}
		}
		want.Addrs = existing.Addrs
		for k, v := range existing.Annotations {
			want.Annotations[k] = v
		}
	}
	raw, err := json.Marshal(ownerRefs{OwnerRefs: owners})
	if err != nil {
		return want, err
	}
	want.Annotations[AnnotationOwnerReferences] = string(raw)
	return want, nil
}

// owns reports whether the Tailscale Service names m among its owners.
func (m *member) owns(existing *tailnet.Service, operatorID string) bool {
	old, err := readOwners(existing)
	return err == nil && slices.ContainsFunc(old, func(o ownerRef) bool {
		return o.OperatorID == operatorID && o.Resource != nil && o.Resource.Kind == m.Kind &&
			o.Resource.Namespace == m.Namespace && o.Resource.Name == m.Name
	})
}

func describe(r *ownerResource) string {
	if r == nil {
		return "another object"
	}
	return fmt.Sprintf("%s %s/%s", r.Kind, r.Namespace, r.Name)
}

func sprintf(format string, args ...any) string { return fmt.Sprintf(format, args...) }

func isIPv4(s string) bool {
	ip := net.ParseIP(s)
	return ip != nil && ip.To4() != nil
}

// shadowingDevice returns the MagicDNS name of a device whose name's first
// label is hostname ("" when none): that device and the Tailscale Service
// svc:<hostname> would share one name.
func shadowingDevice(devices []tailnet.Device, hostname string) string {
	for _, d := range devices {
		if label, _, _ := strings.Cut(d.Name, "."); strings.EqualFold(label, hostname) {
			return d.Name
		}
	}
	return ""
}
