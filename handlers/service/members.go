package service

import (
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tailplane/tailplane/handlers/lib/conditions"
	"github.com/tailplane/tailplane/handlers/lib/groupmember"
	"github.com/tailplane/tailplane/handlers/lib/proxyset"
	"github.com/tailplane/tailplane/handlers/lib/settings"
	"github.com/tailplane/tailplane/proxy/config"
)

// Names of Services served by an ingress ProxyGroup (members.go,
// members_apply.go), the official ones.
const (
	// finalizerProxyGroup holds a Service of a ProxyGroup until its
	// Tailscale Service is gone.
	finalizerProxyGroup = "tailscale.com/service-pg-finalizer"
	// indexGroupMembers indexes the members by ProxyGroup name.
	indexGroupMembers = "proxygroup-services"

	// ConditionSvcValid is False, with reasonSvcInvalid, while the Service
	// cannot be served (never True, as the official operator writes it).
	ConditionSvcValid = "TailscaleIngressSvcValid"
	// ConditionSvcConfigured says whether a replica advertises the
	// Service's Tailscale Service.
	ConditionSvcConfigured = "TailscaleIngressSvcConfigured"
	// ReasonSvcConfigured and ReasonSvcNoBackends are
	// ConditionSvcConfigured's reasons.
	ReasonSvcConfigured = "IngressSvcConfigured"
	ReasonSvcNoBackends = "IngressSvcNoBackendsConfigured"
	reasonSvcInvalid    = groupmember.ReasonIngressSvcInvalid
	// ConditionSvcShared (Tailplane's), True while operators of other
	// clusters serve the member's Tailscale Service too: it names them.
	// Absent when only this cluster serves it.
	ConditionSvcShared = "TailscaleServiceShared"
	// ReasonSvcShared is ConditionSvcShared's reason.
	ReasonSvcShared = "SharedWithOtherClusters"

	// portsNotValidated is the Tailscale Service ports value that accepts
	// every port.
	portsNotValidated = "do-not-validate"
)

// GroupMember renders a LoadBalancer or exposed Service of a ProxyGroup as
// the Tailscale Service that every replica of the group hosts: its ports
// forwarded to its ClusterIP. The error is why it cannot be served.
func GroupMember(svc *corev1.Service, s settings.Settings) (*groupmember.ServiceMember, error) {
	m := &groupmember.ServiceMember{Kind: "Service", Namespace: svc.Namespace, Name: svc.Name, UID: svc.UID,
		Group: svc.Annotations[groupmember.AnnotationProxyGroup]}
	if svc.Spec.Type == corev1.ServiceTypeExternalName {
		return nil, fmt.Errorf("invalid Service: ExternalName Services are not supported on ProxyGroups")
	}
	if problems := Validate(svc, s); len(problems) > 0 {
		return nil, fmt.Errorf("invalid Service: %s", strings.Join(problems, " "))
	}
	var err error
	if m.Hostname, err = Hostname(svc); err != nil {
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
	m.Service = config.Service{Name: m.ServiceName(), L4: l4}
	return m, nil
}

// groupMemberStatus is a member's conditions and, once a replica
// advertises its service, its load balancer entry; m nil clears both.
func groupMemberStatus(svc *corev1.Service, m *groupmember.ServiceMember, st groupmember.Status) ([]metav1.Condition, []corev1.LoadBalancerIngress) {
	if m == nil {
		return conditions.Remove(conditions.Remove(conditions.Remove(svc.Status.Conditions, ConditionSvcValid), ConditionSvcConfigured), ConditionSvcShared), nil
	}
	// A valid member has no Valid condition, as with the official
	// operator, which writes it only as False; one left from an earlier
	// invalid spec goes (the official leaves it stale).
	conds := conditions.Remove(svc.Status.Conditions, ConditionSvcValid)
	configured := metav1.Condition{Type: ConditionSvcConfigured, Status: metav1.ConditionFalse, Reason: ReasonSvcNoBackends,
		Message: fmt.Sprintf(groupmember.MessageBackendsAdvertising, st.Advertising, st.Total)}
	var lb []corev1.LoadBalancerIngress
	if st.Advertising > 0 {
		configured.Status, configured.Reason = metav1.ConditionTrue, ReasonSvcConfigured
		// One entry with both, as the official operator writes it
		// (clients read ingress[0].ip).
		entry := corev1.LoadBalancerIngress{Hostname: st.DNSName}
		if i := slices.IndexFunc(st.Addrs, isIPv4); i >= 0 {
			entry.IP = st.Addrs[i]
		}
		if entry.Hostname != "" || entry.IP != "" {
			lb = []corev1.LoadBalancerIngress{entry}
		}
	}
	conds = conditions.Remove(conds, ConditionSvcShared)
	if len(st.SharedWith) > 0 {
		conds = conditions.Set(conds, metav1.Condition{Type: ConditionSvcShared, Status: metav1.ConditionTrue, Reason: ReasonSvcShared,
			Message: groupmember.SharedMessage(m.ServiceName(), "Service", st.SharedWith)})
	}
	return conditions.Set(conds, configured), lb
}

func isIPv4(s string) bool {
	ip := net.ParseIP(s)
	return ip != nil && ip.To4() != nil
}
