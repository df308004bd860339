package service

import (
	"cmp"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"reflect"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/tailplane/tailplane/handlers/lib/pipeline"
	"github.com/tailplane/tailplane/handlers/lib/proxyset"
	"github.com/tailplane/tailplane/handlers/lib/settings"
	"github.com/tailplane/tailplane/internal/proxystate"
	"github.com/tailplane/tailplane/proxy/config"
)

// Annotations and classes with the official operator's names.
const (
	AnnotationExpose = "tailscale.com/expose"
	// AnnotationProxyGroup moves a Service to a ProxyGroup: the dedicated
	// proxy handler then leaves it alone.
	AnnotationProxyGroup = "tailscale.com/proxy-group"
	// LoadBalancerClass is the default class, hard-coded in the official
	// operator (Claim.Class can name another).
	LoadBalancerClass = settings.DefaultLoadBalancerClass
)

// Claim says which LoadBalancer Services the operator owns.
type Claim struct {
	// Class is the loadBalancerClass served; LoadBalancerClass when empty.
	Class string
	// Default also claims LoadBalancers with no class
	// (OPERATOR_DEFAULT_LOAD_BALANCER).
	Default bool
}

// ClaimOf is the claim of the operator's settings.
func ClaimOf(s settings.Settings) Claim {
	return Claim{Class: s.LoadBalancerClass, Default: s.DefaultLoadBalancer}
}

// Condition type and reasons on the Service, the official names
// (pipeline.ForService).
const (
	ConditionProxyReady  = pipeline.ConditionProxyReady
	ReasonProxyCreated   = pipeline.ReasonProxyCreated
	ReasonProxyPending   = pipeline.ReasonProxyPending
	ReasonProxyInvalid   = pipeline.ReasonProxyInvalid
	ReasonProxyFailed    = pipeline.ReasonProxyFailed
	ReasonInvalidService = pipeline.ReasonInvalidService
)

// Kind says whether and why a Service is ours.
type Kind int

// The kinds of Service.
const (
	// NotOurs: no expose annotation and not a tailscale LoadBalancer (or it
	// uses a ProxyGroup). Never touched.
	NotOurs Kind = iota
	// Expose: annotated tailscale.com/expose: "true".
	Expose
	// LoadBalancer: type LoadBalancer with class tailscale (or no class and
	// OPERATOR_DEFAULT_LOAD_BALANCER). Its status.loadBalancer is ours.
	LoadBalancer
)

// IsTailscaleLoadBalancer reports whether svc is a LoadBalancer the operator
// owns: of the claimed class (tailscale by default), or of no class when the
// claim says Default.
func IsTailscaleLoadBalancer(svc *corev1.Service, claim Claim) bool {
	if svc.Spec.Type != corev1.ServiceTypeLoadBalancer {
		return false
	}
	if c := svc.Spec.LoadBalancerClass; c != nil {
		return *c == cmp.Or(claim.Class, LoadBalancerClass)
	}
	return claim.Default
}

// Classify says whether svc gets a dedicated ingress proxy. A tailscale
// LoadBalancer counts as LoadBalancer even when it also has the expose
// annotation (the status is then still written). Services with
// tailscale.com/proxy-group are served by ProxyGroups, and Services with a
// tailnet target (tailnet-fqdn, tailnet-ip) by the egress handler.
func Classify(svc *corev1.Service, claim Claim) Kind {
	if _, pg := svc.Annotations[AnnotationProxyGroup]; pg {
		return NotOurs
	}
	for _, k := range []string{"tailscale.com/tailnet-fqdn", "tailscale.com/tailnet-ip", "tailscale.com/ts-tailnet-target-ip"} {
		if svc.Annotations[k] != "" {
			return NotOurs
		}
	}
	switch {
	case IsTailscaleLoadBalancer(svc, claim):
		return LoadBalancer
	case svc.Annotations[AnnotationExpose] == "true":
		return Expose
	}
	return NotOurs
}

// Hostname returns the Service's tailnet hostname: the tailscale.com/hostname
// annotation, else <namespace>-<name>. It must be a DNS label; the error
// uses the official operator's wording.
func Hostname(svc *corev1.Service) (string, error) {
	h, set := svc.Annotations[proxystate.AnnotationHostname]
	if !set {
		h = svc.Namespace + "-" + svc.Name
	}
	if err := proxyset.ValidHostname(h); err != nil {
		if set {
			return "", fmt.Errorf("invalid Tailscale hostname specified %q in annotation %s: %s", h, proxystate.AnnotationHostname, err)
		}
		return "", fmt.Errorf("invalid Tailscale hostname %q, use %q annotation to override: %s", h, proxystate.AnnotationHostname, err)
	}
	return strings.ToLower(h), nil
}

// Validate returns every reason svc cannot be served, as the official
// operator's "invalid Service" messages; empty means valid. Headless
// Services are refused.
func Validate(svc *corev1.Service, s settings.Settings) []string {
	var problems []string
	if svc.Spec.ClusterIP == corev1.ClusterIPNone {
		problems = append(problems, "headless Services are not supported.")
	} else if svc.Spec.Type == corev1.ServiceTypeExternalName {
		if svc.Spec.ExternalName == "" {
			problems = append(problems, "the ExternalName Service has no spec.externalName.")
		}
	} else if svc.Spec.ClusterIP == "" {
		problems = append(problems, "the Service has no ClusterIP yet.")
	}
	if _, err := Hostname(svc); err != nil {
		problems = append(problems, err.Error())
	}
	if _, err := proxyset.Tags(svc.Annotations, s.ProxyTags); err != nil {
		problems = append(problems, err.Error())
	}
	if len(svc.Spec.Ports) == 0 {
		problems = append(problems, "the Service has no ports.")
	}
	return problems
}

// ProxyClassName is the ProxyClass the Service asks for (label, annotation,
// then PROXY_DEFAULT_CLASS).
func ProxyClassName(svc *corev1.Service, s settings.Settings) string {
	return proxyset.ProxyClassName(svc.Labels, svc.Annotations, s.DefaultProxyClass)
}

// Parent is the proxyset parent of svc's proxy.
func Parent(svc *corev1.Service) proxyset.Parent {
	return proxyset.Parent{Type: proxyset.ParentService, Namespace: svc.Namespace, Name: svc.Name, UID: svc.UID, Role: Role}
}

// Plan is the proxy svc asks for: one L4 replica forwarding every port to
// the ClusterIP (or the externalName), or Invalid with every reason svc
// cannot be served. pipeline.Render turns it into the proxy's objects.
func Plan(svc *corev1.Service, s settings.Settings) *pipeline.Plan {
	if problems := Validate(svc, s); len(problems) > 0 {
		return &pipeline.Plan{Invalid: strings.Join(problems, " ")}
	}
	hostname, _ := Hostname(svc)
	tags, _ := proxyset.Tags(svc.Annotations, s.ProxyTags)
	return &pipeline.Plan{
		Hostnames: []string{hostname}, Tags: tags, ProxyClass: ProxyClassName(svc, s),
		Config: func(int) (*config.Config, error) { return Config(svc, s) },
	}
}

// Config is the ingress-l4 proxy config for svc: every Service port, TCP and
// UDP, forwarded to the ClusterIP, or for an ExternalName Service to its
// externalName (the proxy resolves it on every new connection, as the
// official proxy's TS_EXPERIMENTAL_DEST_DNS_NAME does).
func Config(svc *corev1.Service, s settings.Settings) (*config.Config, error) {
	if problems := Validate(svc, s); len(problems) > 0 {
		return nil, errors.New("invalid Service: " + strings.Join(problems, " "))
	}
	hostname, _ := Hostname(svc)
	tags, _ := proxyset.Tags(svc.Annotations, s.ProxyTags)
	host := svc.Spec.ClusterIP
	if svc.Spec.Type == corev1.ServiceTypeExternalName {
		host = strings.TrimSuffix(svc.Spec.ExternalName, ".")
	}
	var ports []config.PortMap
	for _, p := range svc.Spec.Ports {
		proto := config.TCP
		switch p.Protocol {
		case corev1.ProtocolUDP:
			proto = config.UDP
		case corev1.ProtocolSCTP:
			continue // tsnet carries TCP and UDP only
		}
		ports = append(ports, config.PortMap{Protocol: proto, Port: int(p.Port), Target: net.JoinHostPort(host, strconv.Itoa(int(p.Port)))})
	}
	if len(ports) == 0 {
		return nil, errors.New("invalid Service: no TCP or UDP ports")
	}
	return &config.Config{
		Version:  config.Version,
		Hostname: hostname,
		Tags:     tags,
		Role:     config.RoleIngressL4,
		L4:       &config.L4{Ports: ports},
	}, nil
}

// LoadBalancerIngress is the status.loadBalancer.ingress of a tailscale
// LoadBalancer Service once its proxy reported a device: the MagicDNS name
// first, then the tailnet IPs of the ClusterIP's family (IPv4 for an IPv4
// ClusterIP), as the official operator writes it. It returns nil while the
// device has no name yet.
func LoadBalancerIngress(svc *corev1.Service, dev proxyset.Device) ([]corev1.LoadBalancerIngress, error) {
	if dev.FQDN == "" {
		return nil, nil
	}
	cluster, err := netip.ParseAddr(svc.Spec.ClusterIP)
	if err != nil {
		return nil, fmt.Errorf("failed to parse cluster IP: %v", err)
	}
	out := []corev1.LoadBalancerIngress{{Hostname: dev.FQDN}}
	for _, s := range dev.IPs {
		ip, err := netip.ParseAddr(s)
		if err != nil {
			continue
		}
		if ip.Is4() == cluster.Is4() {
			out = append(out, corev1.LoadBalancerIngress{IP: s})
		}
	}
	return out, nil
}

// SameLoadBalancer reports whether status.loadBalancer.ingress have already
// says want: the API server fills in ipMode (VIP) where an entry has an IP,
// which is no difference to write again.
func SameLoadBalancer(want, have []corev1.LoadBalancerIngress) bool {
	if len(want) != len(have) {
		return false
	}
	for i := range want {
		h := have[i]
		if want[i].IPMode == nil {
			h.IPMode = nil
		}
		if !reflect.DeepEqual(want[i], h) {
			return false
		}
	}
	return true
}
