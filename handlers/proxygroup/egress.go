package proxygroup

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/tailplane/tailplane/crds/tailscale/v1alpha1"
	"github.com/tailplane/tailplane/handlers/egress"
	"github.com/tailplane/tailplane/handlers/lib/proxyset"
	"github.com/tailplane/tailplane/handlers/lib/settings"
	"github.com/tailplane/tailplane/proxy/config"
)

// Labels and annotations of the Services the operator makes for egress
// members, with the official operator's names where it has them.
const (
	labelProxyGroup = "tailscale.com/proxy-group"
	labelSvcType    = "tailscale.com/svc-type"
	svcTypeEgress   = "egress"
	// annotationTargetFQDN and annotationTargetIP record a member's
	// tailnet target on its cluster Service, from which the group's
	// replicas are configured.
	annotationTargetFQDN = "tailplane.dev/egress-target-fqdn"
	annotationTargetIP   = "tailplane.dev/egress-target-ip"

	// finalizerEgress holds an egress member until its cluster Service and
	// EndpointSlice are gone.
	finalizerEgress = "tailplane.dev/egress-proxygroup"

	// Conditions and reasons of egress members (the official ones).
	ConditionEgressValid      = "TailscaleEgressSvcValid"
	ConditionEgressConfigured = "TailscaleEgressSvcConfigured"
	ConditionEgressReady      = "TailscaleEgressSvcReady"
	ReasonEgressValid         = "EgressSvcValid"
	ReasonEgressInvalid       = "EgressSvcInvalid"
	ReasonProxyGroupNotReady  = "ProxyGroupNotReady"
	ReasonReady               = "ReadyToRouteTraffic"
	ReasonPartiallyReady      = "PartiallyReadyToRouteTraffic"
	ReasonNotReady            = "NotReadyToRouteTraffic"
	reasonNoProxies           = "NoProxiesConfigured"
	// ReasonInvalidService is the official Event reason of a refused
	// Service.
	ReasonInvalidService = "INVALIDSERVICE"

	// egressPortMin and egressPortMax bound the ports the replicas listen
	// on, one per member port, unique in a group (the official range).
	egressPortMin, egressPortMax = 10000, 11000
)

// EgressMember is an ExternalName Service with a tailnet target served by an
// egress ProxyGroup.
type EgressMember struct {
	Namespace, Name, Group string
	// Target is the tailnet destination (FQDN or IP), without ports.
	Target config.EgressTarget
	// Ports are the Service's ports.
	Ports []corev1.ServicePort
	// pg is the group, once admitted.
	pg *v1alpha1.ProxyGroup
}

// EgressMemberOf reads an egress member; the error is why it is refused.
func EgressMemberOf(svc *corev1.Service, s settings.Settings) (*EgressMember, error) {
	var problems []string
	if svc.Spec.Type != corev1.ServiceTypeExternalName {
		problems = append(problems, "a Service served by an egress ProxyGroup must be of type ExternalName.")
	}
	for _, p := range egress.Validate(svc, s) {
		if !strings.Contains(p, "hostname") { // the group's devices have their own names
			problems = append(problems, p)
		}
	}
	for _, p := range svc.Spec.Ports {
		if p.Protocol == corev1.ProtocolSCTP {
			problems = append(problems, fmt.Sprintf("port %d: SCTP is not supported.", p.Port))
		}
	}
	if len(problems) > 0 {
		return nil, errors.New("invalid Service: " + strings.Join(problems, " "))
	}
	m := &EgressMember{Namespace: svc.Namespace, Name: svc.Name, Group: svc.Annotations[AnnotationProxyGroup], Ports: svc.Spec.Ports,
		Target: config.EgressTarget{IP: egress.TailnetIP(svc)}}
	if fqdn := svc.Annotations[egress.AnnotationTailnetFQDN]; fqdn != "" {
		m.Target = config.EgressTarget{FQDN: strings.TrimSuffix(fqdn, ".") + "."}
	}
	return m, nil
}

// ClusterServiceName is the name, in the operator namespace, of the
// ClusterIP Service through which the member's traffic reaches the group:
// ts-<name>-<hash of namespace/name>.
func ClusterServiceName(namespace, name string) string {
	sum := sha256.Sum256([]byte(namespace + "/" + name))
	short := name
	if len(short) > 40 {
		short = short[:40]
	}
	return "ts-" + strings.Trim(short, "-.") + "-" + hex.EncodeToString(sum[:])[:8]
}

// egressLabels are the labels of a member's cluster Service and
// EndpointSlice.
func egressLabels(namespace, name, group string) map[string]string {
	l := proxyset.Parent{Type: proxyset.ParentService, Namespace: namespace, Name: name}.OfficialLabels()
	l[labelProxyGroup] = group
	l[labelSvcType] = svcTypeEgress
	return l
}

// portKey identifies a member port across renders.
func portKey(p corev1.ServicePort) string {
	proto := p.Protocol
	if proto == "" {
		proto = corev1.ProtocolTCP
	}
	return string(proto) + "/" + strconv.Itoa(int(p.Port))
}

// ClusterService is the member's ClusterIP Service (no selector: its
// EndpointSlice lists the replicas that serve it). Each port forwards to a
// port of the egress range the replicas listen on: kept from existing,
// otherwise the lowest one no other member of the group (taken) uses.
func ClusterService(m *EgressMember, namespace string, existing *corev1.Service, taken map[int32]bool) (*corev1.Service, error) {
	kept := map[string]int32{}
	if existing != nil {
		for _, p := range existing.Spec.Ports {
			if !taken[p.TargetPort.IntVal] { // another member's since: moved
				kept[portKey(p)] = p.TargetPort.IntVal
			}
		}
	}
	used := func(port int32) bool { return taken[port] || slices.Contains(mapsValues(kept), port) }
	var ports []corev1.ServicePort
	for i, p := range m.Ports {
		target, ok := kept[portKey(p)]
		if !ok || target == 0 {
			target = 0
			for c := int32(egressPortMin); c < egressPortMax; c++ {
				if !used(c) {
					target = c
					break
				}
			}
			if target == 0 {
				return nil, fmt.Errorf("ProxyGroup %s has no free egress port left in %d-%d", m.Group, egressPortMin, egressPortMax-1)
			}
			kept[portKey(p)] = target
		}
		name := p.Name
		if name == "" {
			name = "port-" + strconv.Itoa(i)
		}
		proto := p.Protocol
		if proto == "" {
			proto = corev1.ProtocolTCP
		}
		ports = append(ports, corev1.ServicePort{Name: name, Protocol: proto, Port: p.Port, TargetPort: intstr.FromInt32(target)})
	}
	ann := map[string]string{annotationTargetIP: m.Target.IP}
	if m.Target.FQDN != "" {
		ann = map[string]string{annotationTargetFQDN: m.Target.FQDN}
	}
	return &corev1.Service{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{Name: ClusterServiceName(m.Namespace, m.Name), Namespace: namespace,
			Labels: egressLabels(m.Namespace, m.Name, m.Group), Annotations: ann},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, Ports: ports},
	}, nil
}

func mapsValues(m map[string]int32) []int32 {
	out := make([]int32, 0, len(m))
	for _, v := range m {
		out = append(out, v)
	}
	return out
}

// targetOf is what the group's replicas serve for one cluster Service:
// listen on its target ports, dial its tailnet target on its ports.
func targetOf(cs *corev1.Service) (config.EgressTarget, bool) {
	t := config.EgressTarget{FQDN: cs.Annotations[annotationTargetFQDN], IP: cs.Annotations[annotationTargetIP]}
	if (t.FQDN == "") == (t.IP == "") {
		return t, false
	}
	for _, p := range cs.Spec.Ports {
		proto := config.TCP
		if p.Protocol == corev1.ProtocolUDP {
			proto = config.UDP
		}
		t.Ports = append(t.Ports, config.PortMap{Protocol: proto, Port: int(p.TargetPort.IntVal), TargetPort: int(p.Port)})
	}
	return t, true
}

// endpointSlice is the cluster Service's EndpointSlice of one address family:
// the replicas (pod IPs) that serve it, ready.
func endpointSlice(cs *corev1.Service, family discoveryv1.AddressType, podIPs []string) *discoveryv1.EndpointSlice {
	labels := map[string]string{discoveryv1.LabelServiceName: cs.Name, discoveryv1.LabelManagedBy: "tailplane"}
	for k, v := range cs.Labels {
		labels[k] = v
	}
	s := &discoveryv1.EndpointSlice{
		TypeMeta: metav1.TypeMeta{APIVersion: "discovery.k8s.io/v1", Kind: "EndpointSlice"},
		ObjectMeta: metav1.ObjectMeta{Name: cs.Name + "-" + strings.ToLower(string(family)), Namespace: cs.Namespace,
			Labels: labels},
		AddressType: family,
		Endpoints:   []discoveryv1.Endpoint{},
	}
	for _, p := range cs.Spec.Ports {
		port, proto, name := p.TargetPort.IntVal, p.Protocol, p.Name
		s.Ports = append(s.Ports, discoveryv1.EndpointPort{Name: &name, Protocol: &proto, Port: &port})
	}
	ready := true
	for _, ip := range podIPs {
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{ip}, Conditions: discoveryv1.EndpointConditions{Ready: &ready}})
	}
	return s
}

// externalNameOf is what the member's externalName is rewritten to.
func externalNameOf(cs *corev1.Service, clusterDomain string) string {
	if clusterDomain == "" {
		clusterDomain = egress.DefaultClusterDomain
	}
	return fmt.Sprintf("%s.%s.svc.%s", cs.Name, cs.Namespace, clusterDomain)
}

// egressConfig is replica ordinal's config of an egress group: every
// member's target.
func egressConfig(pg *v1alpha1.ProxyGroup, targets []config.EgressTarget, tags []string, loginServer, authKey string, ordinal int) *config.Config {
	return &config.Config{
		Version: config.Version, Hostname: hostnames(pg)[ordinal], Tags: tags, LoginServer: loginServer, AuthKey: authKey,
		Role: config.RoleEgress, Egress: &config.Egress{Targets: targets},
	}
}
