package egress

import (
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"regexp"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tailplane/tailplane/handlers/lib/pipeline"
	"github.com/tailplane/tailplane/handlers/lib/proxyset"
	"github.com/tailplane/tailplane/handlers/lib/settings"
	"github.com/tailplane/tailplane/internal/proxystate"
	"github.com/tailplane/tailplane/proxy/config"
)

// Annotations with the official operator's names.
const (
	AnnotationTailnetFQDN = "tailscale.com/tailnet-fqdn"
	AnnotationTailnetIP   = "tailscale.com/tailnet-ip"
	// AnnotationTailnetIPDeprecated is the old name of tailnet-ip; the new
	// name wins when both are set.
	AnnotationTailnetIPDeprecated = "tailscale.com/ts-tailnet-target-ip"
	// AnnotationProxyGroup moves egress to a ProxyGroup: no dedicated proxy
	// then (members.go serves it).
	AnnotationProxyGroup = "tailscale.com/proxy-group"
	// DefaultClusterDomain is used when /etc/resolv.conf names none.
	DefaultClusterDomain = "cluster.local"
)

// magicDNSName is the official check for tailnet-fqdn values.
var magicDNSName = regexp.MustCompile(`^[a-zA-Z0-9-]+\.[a-zA-Z0-9-]+\.ts\.net\.?$`)

// TailnetIP returns the tailnet-ip annotation, or its deprecated alias.
func TailnetIP(svc *corev1.Service) string {
	if v := svc.Annotations[AnnotationTailnetIP]; v != "" {
		return v
	}
	return svc.Annotations[AnnotationTailnetIPDeprecated]
}

// IsEgress reports whether svc asks for a dedicated egress proxy.
func IsEgress(svc *corev1.Service) bool {
	if _, pg := svc.Annotations[AnnotationProxyGroup]; pg {
		return false
	}
	return svc.Annotations[AnnotationTailnetFQDN] != "" || TailnetIP(svc) != ""
}

// Validate returns every reason svc cannot get an egress proxy, in the
// official operator's words; empty means valid.
func Validate(svc *corev1.Service, s settings.Settings) []string {
	var problems []string
	fqdn, ip := svc.Annotations[AnnotationTailnetFQDN], TailnetIP(svc)
	if fqdn != "" && ip != "" {
		problems = append(problems, fmt.Sprintf("only one of annotations %s and %s can be set", AnnotationTailnetIP, AnnotationTailnetFQDN))
	}
	if fqdn != "" && !magicDNSName.MatchString(fqdn) {
		problems = append(problems, fmt.Sprintf("invalid value of annotation %s: %q does not appear to be a valid MagicDNS name", AnnotationTailnetFQDN, fqdn))
	}
	if ip != "" {
		if _, err := netip.ParseAddr(ip); err != nil {
			problems = append(problems, fmt.Sprintf("invalid value of annotation %s: %q could not be parsed as a valid IP Address, error: %s", AnnotationTailnetIP, ip, err))
		}
	}
	if _, err := hostname(svc); err != nil {
		problems = append(problems, err.Error())
	}
	if _, err := proxyset.Tags(svc.Annotations, s.ProxyTags); err != nil {
		problems = append(problems, err.Error())
	}
	// tailplane-proxy listens per port (the official proxy forwards every
	// port with iptables), so the ports must be listed.
	if len(svc.Spec.Ports) == 0 {
		problems = append(problems, "the Service has no ports.")
	}
	return problems
}

func hostname(svc *corev1.Service) (string, error) {
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

// Plan is the proxy svc asks for: one egress replica dialling the tailnet
// target, with the headless Service (Headless) as its extra object, or
// Invalid with every reason svc cannot be served. pipeline.Render turns it
// into the proxy's objects; rewriting the user's Service is the module's.
func Plan(svc *corev1.Service, s settings.Settings) *pipeline.Plan {
	if problems := Validate(svc, s); len(problems) > 0 {
		return &pipeline.Plan{Invalid: strings.Join(problems, " ")}
	}
	h, _ := hostname(svc)
	tags, _ := proxyset.Tags(svc.Annotations, s.ProxyTags)
	return &pipeline.Plan{
		Hostnames: []string{h}, Tags: tags,
		ProxyClass: proxyset.ProxyClassName(svc.Labels, svc.Annotations, s.DefaultProxyClass),
		Config:     func(int) (*config.Config, error) { return Config(svc, s) },
		Extra:      func(objs *proxyset.Objects) []any { return []any{Headless(svc, objs)} },
	}
}

// Config is the egress proxy config: each Service port, TCP or UDP, is
// listened on and dialled on the tailnet target.
func Config(svc *corev1.Service, s settings.Settings) (*config.Config, error) {
	if problems := Validate(svc, s); len(problems) > 0 {
		return nil, errors.New("invalid Service: " + strings.Join(problems, " "))
	}
	h, _ := hostname(svc)
	tags, _ := proxyset.Tags(svc.Annotations, s.ProxyTags)
	target := config.EgressTarget{IP: TailnetIP(svc)}
	if fqdn := svc.Annotations[AnnotationTailnetFQDN]; fqdn != "" {
		target = config.EgressTarget{FQDN: strings.TrimSuffix(fqdn, ".") + "."}
	}
	for _, p := range svc.Spec.Ports {
		proto := config.TCP
		switch p.Protocol {
		case corev1.ProtocolUDP:
			proto = config.UDP
		case corev1.ProtocolSCTP:
			continue
		}
		target.Ports = append(target.Ports, config.PortMap{Protocol: proto, Port: int(p.Port), TargetPort: int(p.Port)})
	}
	return &config.Config{
		Version: config.Version, Hostname: h, Tags: tags,
		Role: config.RoleEgress, Egress: &config.Egress{Targets: []config.EgressTarget{target}},
	}, nil
}

// NameKey tells egress proxies' object names apart from those of the
// exposed-Service proxy of the same Service (proxyset.Parent.NameKey);
// releases before it named both after "svc".
const NameKey = "egress"

// Parent is the proxyset parent of svc's egress proxy.
func Parent(svc *corev1.Service) proxyset.Parent {
	return proxyset.Parent{Type: proxyset.ParentService, Namespace: svc.Namespace, Name: svc.Name, UID: svc.UID,
		Role: Role, NameKey: NameKey}
}

// Headless is the headless Service that gives the egress proxy's Pods a DNS
// name, with the user's ports.
func Headless(svc *corev1.Service, objs *proxyset.Objects) *corev1.Service {
	var ports []corev1.ServicePort
	for _, p := range svc.Spec.Ports {
		ports = append(ports, corev1.ServicePort{Name: p.Name, Protocol: p.Protocol, Port: p.Port})
	}
	sts := objs.StatefulSet
	return &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{Name: objs.Names.Base, Namespace: sts.Namespace, Labels: Parent(svc).Labels()},
		Spec: corev1.ServiceSpec{
			ClusterIP:      corev1.ClusterIPNone,
			Selector:       maps.Clone(sts.Spec.Selector.MatchLabels),
			Ports:          ports,
			IPFamilyPolicy: new(corev1.IPFamilyPolicyPreferDualStack),
		},
	}
}

// ExternalName is the DNS name the user's Service is rewritten to point at.
func ExternalName(headless *corev1.Service, clusterDomain string) string {
	if clusterDomain == "" {
		clusterDomain = DefaultClusterDomain
	}
	return fmt.Sprintf("%s.%s.svc.%s", headless.Name, headless.Namespace, clusterDomain)
}

// Rewrite returns a copy of the user's Service turned into an ExternalName
// Service pointing at the egress proxy, with no selector, as the official
// operator does.
func Rewrite(svc *corev1.Service, externalName string) *corev1.Service {
	out := svc.DeepCopy()
	out.Spec.Type = corev1.ServiceTypeExternalName
	out.Spec.ExternalName = externalName
	out.Spec.Selector = nil
	out.Spec.ClusterIP, out.Spec.ClusterIPs = "", nil
	out.Spec.IPFamilies, out.Spec.IPFamilyPolicy = nil, nil
	return out
}

// ClusterDomain reads the cluster domain from a resolv.conf's contents: the
// third search domain (svc.<domain> order: <ns>.svc.<d>, svc.<d>, <d>), as the
// official operator does, falling back to cluster.local.
func ClusterDomain(resolvConf string) string {
	for line := range strings.SplitSeq(resolvConf, "\n") {
		fields := strings.Fields(line)
		if len(fields) > 0 && fields[0] == "search" && len(fields) >= 4 {
			return fields[3]
		}
	}
	return DefaultClusterDomain
}
