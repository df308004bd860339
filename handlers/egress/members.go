package egress

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tailplane/tailplane/handlers/lib/conditions"
	"github.com/tailplane/tailplane/handlers/lib/groupmember"
	"github.com/tailplane/tailplane/handlers/lib/pipeline"
	"github.com/tailplane/tailplane/handlers/lib/settings"
	"github.com/tailplane/tailplane/proxy/config"
)

// Names of egress Services served by an egress ProxyGroup (members.go,
// members_apply.go), the official ones unless said otherwise.
const (
	// finalizerProxyGroup (Tailplane's) holds an egress member until its
	// cluster Service and EndpointSlices are gone.
	finalizerProxyGroup = "tailplane.dev/egress-proxygroup"
	// indexGroupMembers indexes the members by ProxyGroup name.
	indexGroupMembers = "proxygroup-egress"

	// Conditions and reasons of egress members.
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
	// ReasonInvalidService is the Event reason of a refused Service.
	ReasonInvalidService = pipeline.ReasonInvalidService
)

// GroupMember reads an egress Service of an egress ProxyGroup; the error is
// why it is refused.
func GroupMember(svc *corev1.Service, s settings.Settings) (*groupmember.Egress, error) {
	var problems []string
	if svc.Spec.Type != corev1.ServiceTypeExternalName {
		problems = append(problems, "a Service served by an egress ProxyGroup must be of type ExternalName.")
	}
	for _, p := range Validate(svc, s) {
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
	m := &groupmember.Egress{Namespace: svc.Namespace, Name: svc.Name, Group: svc.Annotations[groupmember.AnnotationProxyGroup],
		Ports: svc.Spec.Ports, Target: config.EgressTarget{IP: TailnetIP(svc)}}
	if fqdn := svc.Annotations[AnnotationTailnetFQDN]; fqdn != "" {
		m.Target = config.EgressTarget{FQDN: strings.TrimSuffix(fqdn, ".") + "."}
	}
	return m, nil
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
		ObjectMeta: metav1.ObjectMeta{Name: endpointSliceName(cs.Name, family), Namespace: cs.Namespace,
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

// endpointSliceName names the cluster Service's EndpointSlice of family.
func endpointSliceName(clusterService string, family discoveryv1.AddressType) string {
	return clusterService + "-" + strings.ToLower(string(family))
}

// externalNameOf is what the member's externalName is rewritten to.
func externalNameOf(cs *corev1.Service, clusterDomain string) string {
	if clusterDomain == "" {
		clusterDomain = DefaultClusterDomain
	}
	return fmt.Sprintf("%s.%s.svc.%s", cs.Name, cs.Namespace, clusterDomain)
}

// hasTarget reports whether a replica's config Secret has want among its
// targets.
func hasTarget(cfgSecret *corev1.Secret, want config.EgressTarget) bool {
	if cfgSecret == nil {
		return false
	}
	var c config.Config
	if json.Unmarshal(cfgSecret.Data[config.SecretKey], &c) != nil || c.Egress == nil {
		return false
	}
	return slices.ContainsFunc(c.Egress.Targets, func(t config.EgressTarget) bool {
		return t.FQDN == want.FQDN && t.IP == want.IP && slices.Equal(t.Ports, want.Ports)
	})
}

// configHash identifies what the replicas are configured with for the
// cluster Service (its ports, target and group), in
// TailscaleEgressSvcConfigured's reason.
func configHash(cs *corev1.Service) string {
	b, _ := json.Marshal([]any{cs.Spec.Ports, cs.Annotations, cs.Labels[groupmember.LabelProxyGroup]})
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])[:16]
}

// readiness is what TailscaleEgressSvcConfigured and TailscaleEgressSvcReady
// are written from.
type readiness struct {
	pg             string
	serving, total int
	hash           string
}

// memberConditions are svc's conditions with TailscaleEgressSvcValid and,
// once configured (r not nil), the other two (removed otherwise).
func memberConditions(svc *corev1.Service, valid metav1.ConditionStatus, reason, msg string, r *readiness) []metav1.Condition {
	conds := conditions.Set(svc.Status.Conditions, metav1.Condition{Type: ConditionEgressValid, Status: valid, Reason: reason, Message: msg})
	if r == nil {
		return conditions.Remove(conditions.Remove(conds, ConditionEgressConfigured), ConditionEgressReady)
	}
	conds = conditions.Set(conds, metav1.Condition{Type: ConditionEgressConfigured, Status: metav1.ConditionTrue,
		Reason: "ConfiguredFor:ProxyGroup:" + r.pg + ":Config:" + r.hash, Message: "the ProxyGroup's replicas are configured for this Service"})
	ready := metav1.Condition{Type: ConditionEgressReady, Status: metav1.ConditionTrue,
		Message: fmt.Sprintf("%d/%d ProxyGroup replicas route traffic for this Service", r.serving, r.total)}
	switch {
	case r.total == 0:
		ready.Status, ready.Reason = metav1.ConditionFalse, reasonNoProxies
	case r.serving == 0:
		ready.Status, ready.Reason = metav1.ConditionFalse, ReasonNotReady
	case r.serving < r.total:
		ready.Reason = ReasonPartiallyReady
	default:
		ready.Reason = ReasonReady
	}
	return conditions.Set(conds, ready)
}

func equalConditions(a, b []metav1.Condition) bool {
	return slices.EqualFunc(a, b, func(x, y metav1.Condition) bool {
		return x.Type == y.Type && x.Status == y.Status && x.Reason == y.Reason && x.Message == y.Message
	})
}
