package gateway

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/tailplane/tailplane/handlers/lib/gatewayapi"
	"github.com/tailplane/tailplane/handlers/lib/groupmember"
	"github.com/tailplane/tailplane/handlers/lib/pipeline"
	"github.com/tailplane/tailplane/handlers/lib/proxyset"
	"github.com/tailplane/tailplane/handlers/lib/resources"
	"github.com/tailplane/tailplane/handlers/lib/tsservice"
	"github.com/tailplane/tailplane/proxy/config"
	"github.com/tailplane/tailplane/runtime"
)

// Names of Gateways served by an ingress ProxyGroup.
const (
	// FinalizerProxyGroup holds a Gateway of a ProxyGroup until its
	// Tailscale Service and certificate Secret are gone.
	FinalizerProxyGroup = "tailplane.dev/gateway-pg-finalizer"
	// indexGroupMembers indexes the member Gateways by ProxyGroup name.
	indexGroupMembers = "proxygroup-gateways"
	// indexGroupOf indexes member Gateways' ProxyGroup by Gateway
	// ("namespace/name" -> group name), so that a route's change has the
	// group render its replicas again.
	indexGroupOf = "gateway-proxygroup"
)

// ReasonFunnelNotSupported is the Warning of a Gateway of a ProxyGroup
// that asks for Funnel (the reason an Ingress of a ProxyGroup gets).
const ReasonFunnelNotSupported = "FunnelNotSupported"

// funnelOnGroup says why a ProxyGroup Gateway's Funnel annotation does
// nothing: Tailscale Services are not offered on Funnel.
const funnelOnGroup = AnnotationFunnel + " is not supported on a Gateway served by a ProxyGroup and is ignored; " +
	"remove the ProxyGroup (spec.infrastructure.parametersRef or tailscale.com/proxy-group) to serve it on a device of its own, with Funnel"

// GroupName is the ProxyGroup a Gateway asks to be served by:
// spec.infrastructure.parametersRef naming a tailscale.com ProxyGroup, else
// the tailscale.com/proxy-group annotation (as on Ingresses); "" for a
// device of its own.
func GroupName(obj *unstructured.Unstructured) string {
	gw, err := decode(obj)
	if err != nil {
		return ""
	}
	return groupName(gw)
}

func groupName(gw *gatewayv1.Gateway) string {
	if inf := gw.Spec.Infrastructure; inf != nil && inf.ParametersRef != nil &&
		string(inf.ParametersRef.Group) == "tailscale.com" && string(inf.ParametersRef.Kind) == "ProxyGroup" {
		return inf.ParametersRef.Name
	}
	return gw.Annotations[groupmember.AnnotationProxyGroup]
}

// registerMember adds Gateways that name a ProxyGroup as members of an
// ingress group (groupmember.ServiceKind): each is a Tailscale Service,
// svc:<hostname>, whose listeners every replica of the group serves on the
// service's addresses, with one certificate for the service's MagicDNS
// name shared by the replicas. The Gateway's status is the service's:
// Programmed once a replica advertises it, its addresses the service's.
func (m *module) registerMember(op *runtime.Operator, p *pipeline.Pipeline, members *groupmember.Registry) {
	op.Index(resources.Gateways, indexGroupOf, func(obj *unstructured.Unstructured) map[string]any {
		if g := GroupName(obj); g != "" {
			return map[string]any{runtime.ObjectKey(obj.GetNamespace(), obj.GetName()): g}
		}
		return nil
	}, m.d.Scope()...)
	groupmember.RegisterServiceKind(op, m.d, p, members, groupmember.ServiceKind{
		Kind: "Gateway", Resource: resources.Gateways, Finalizer: FinalizerProxyGroup, Index: indexGroupMembers,
		Group:    GroupName,
		IsMember: func(obj *unstructured.Unstructured) bool { return m.ofOurClass(obj) && GroupName(obj) != "" },
		Render: func(ctx context.Context, obj *unstructured.Unstructured) (*groupmember.ServiceMember, error) {
			gw, err := decode(obj)
			if err != nil {
				return nil, err
			}
			if Funnel(gw) {
				m.d.Post(gw, corev1.EventTypeWarning, ReasonFunnelNotSupported, funnelOnGroup)
			}
			member, _, err := m.member(ctx, gw)
			return member, err
		},
		Host:    m.hostMember,
		Invalid: m.invalidMember,
		Status:  m.memberStatus,
	})
}

// member renders gw as its group's Tailscale Service, with its Render
// result (which the member's status is written from).
func (m *module) member(ctx context.Context, gw *gatewayv1.Gateway) (*groupmember.ServiceMember, *gatewayapi.Result, error) {
	hostname, err := Hostname(gw)
	if err != nil {
		return nil, nil, err
	}
	tags, err := proxyset.Tags(gw.Annotations, m.d.Settings.ProxyTags)
	if err != nil {
		return nil, nil, err
	}
	res, err := gatewayapi.Render(gw, gatewayapi.Inputs{Routes: m.routesOf(gw), Grants: m.grants(), Lookups: m.lookups(ctx),
		CertificateName: func(l string) string { return CertificateName(gw, l) }, SharedCertificate: tsservice.CertSecretName(hostname)})
	if err != nil {
		return nil, nil, err
	}
	m.remember(gw, res)
	switch {
	case res.Refused != "":
		return nil, res, fmt.Errorf("%s", res.Refused)
	case res.Config == nil:
		return nil, res, fmt.Errorf("no listener of the Gateway is valid")
	}
	member := &groupmember.ServiceMember{Kind: "Gateway", Namespace: gw.Namespace, Name: gw.Name, UID: gw.UID,
		Group: groupName(gw), Hostname: hostname, Tags: tags}
	for _, l := range res.Config.Listeners {
		proto := "tcp"
		if l.Protocol == config.ListenerUDP {
			proto = "udp"
		}
		port := fmt.Sprintf("%s:%d", proto, l.Port)
		if !slices.Contains(member.Ports, port) {
			member.Ports = append(member.Ports, port)
		}
	}
	member.Service = config.Service{Name: member.ServiceName(), Gateway: res.Config}
	return member, res, nil
}

// hostMember reads the member Gateway with key and renders it for its
// group's replicas; nil when it is gone or cannot be served (its own
// handler says why).
func (m *module) hostMember(ctx context.Context, k runtime.Key, group string) (*groupmember.Hosted, error) {
	obj, err := m.d.Dyn.Resource(resources.Gateways).Namespace(k.Namespace).Get(ctx, k.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read Gateway %s/%s of ProxyGroup %s: %w", k.Namespace, k.Name, group, err)
	}
	gw, err := decode(obj)
	if err != nil {
		return nil, err
	}
	member, res, err := m.member(ctx, gw)
	if err != nil || member == nil {
		return nil, nil
	}
	secrets := append(member.Service.SharedCertificates(), res.PluginSecrets...)
	return &groupmember.Hosted{Service: member.Service, Secrets: secrets, Created: gw.CreationTimestamp}, nil
}

// invalidMember shows why a member Gateway cannot be served: an Event,
// Accepted False (InvalidParameters: the ProxyGroup it names), and its
// routes' entries as its listeners say.
func (m *module) invalidMember(ctx context.Context, obj *unstructured.Unstructured, reason, msg string) error {
	gw, err := decode(obj)
	if err != nil {
		return err
	}
	m.d.Post(gw, corev1.EventTypeWarning, reason, msg)
	res := m.recall(gw)
	if res == nil {
		res = &gatewayapi.Result{}
	}
	if res.Refused == "" {
		refused := *res
		refused.Refused, refused.RefusedReason = msg, string(gatewayv1.GatewayReasonInvalidParameters)
		res = &refused
	}
	return m.writeStatuses(ctx, gw, res, gatewayapi.Proxy{Reason: string(gatewayv1.GatewayReasonInvalid), Message: msg})
}

// memberStatus writes a member Gateway's status from its Tailscale
// Service: Programmed once a replica advertises it, with the service's
// addresses; member nil clears what it wrote.
func (m *module) memberStatus(ctx context.Context, obj *unstructured.Unstructured, member *groupmember.ServiceMember, st groupmember.Status) error {
	if member == nil {
		return m.release(ctx, obj, nil)
	}
	gw, err := decode(obj)
	if err != nil {
		return err
	}
	res := m.recall(gw)
	if res == nil {
		return nil
	}
	p := gatewayapi.Proxy{Programmed: st.Advertising > 0, Device: proxyset.Device{FQDN: st.DNSName, IPs: st.Addrs}}
	if !p.Programmed {
		p.Reason = string(gatewayv1.GatewayReasonPending)
		p.Message = fmt.Sprintf(groupmember.MessageBackendsAdvertising, st.Advertising, st.Total)
		if len(st.Addrs) == 0 {
			p.Reason = string(gatewayv1.GatewayReasonAddressNotAssigned)
		}
	}
	return m.writeStatuses(ctx, gw, res, p)
}

// groupOf is the ProxyGroup of a member Gateway ("" for a device of its
// own), from the index.
func (m *module) groupOf(gatewayKey string) string {
	if x := m.d.Op.GetIndex(indexGroupOf); x != nil {
		for _, v := range x.Get(gatewayKey) {
			return v.(string)
		}
	}
	return ""
}
