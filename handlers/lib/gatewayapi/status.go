package gatewayapi

import (
	"fmt"
	"net/netip"
	"sort"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/tailplane/tailplane/handlers/lib/proxyset"
)

// Proxy is what the pipeline says of the Gateway's proxy.
type Proxy struct {
	// Programmed: the device serves the config under its name.
	Programmed bool
	// Reason and Message say why not (a GatewayConditionReason).
	Reason, Message string
	// Device is the proxy's device (zero until it logged in).
	Device proxyset.Device
}

// Status is the status gw should have: its addresses (the device's
// tailnet IPs, IPv4 first, then its MagicDNS name), its conditions, and one
// entry per listener. Conditions carry no transition time: the apply step
// keeps the old one when a condition did not change.
func Status(gw *gatewayv1.Gateway, res *Result, p Proxy) gatewayv1.GatewayStatus {
	st := gatewayv1.GatewayStatus{Addresses: addresses(p.Device)}
	valid := 0
	for _, l := range res.listeners {
		if l.valid() {
			valid++
		}
	}
	accepted := cond(gatewayv1.GatewayConditionAccepted, true, gatewayv1.GatewayReasonAccepted, "the Gateway is served by a tailnet device")
	switch {
	case res.Refused != "":
		accepted = condFalse(string(gatewayv1.GatewayConditionAccepted), res.RefusedReason, res.Refused)
	case valid == 0:
		accepted = condFalse(string(gatewayv1.GatewayConditionAccepted), string(gatewayv1.GatewayReasonListenersNotValid), "no listener is valid")
	case valid < len(res.listeners):
		accepted.Reason, accepted.Message = string(gatewayv1.GatewayReasonListenersNotValid), fmt.Sprintf("%d of %d listeners are valid", valid, len(res.listeners))
	}
	programmed := cond(gatewayv1.GatewayConditionProgrammed, true, gatewayv1.GatewayReasonProgrammed, "the device serves the Gateway's listeners")
	if !p.Programmed {
		programmed = condFalse(string(gatewayv1.GatewayConditionProgrammed), p.Reason, p.Message)
	}
	st.Conditions = []metav1.Condition{accepted, programmed}
	for _, l := range res.listeners {
		st.Listeners = append(st.Listeners, listenerStatus(l, p.Programmed))
	}
	for i := range st.Conditions {
		st.Conditions[i].ObservedGeneration = gw.Generation
	}
	for i := range st.Listeners {
		for j := range st.Listeners[i].Conditions {
			st.Listeners[i].Conditions[j].ObservedGeneration = gw.Generation
		}
	}
	return st
}

func listenerStatus(l *listener, programmed bool) gatewayv1.ListenerStatus {
	accepted := cond(gatewayv1.ListenerConditionAccepted, true, gatewayv1.ListenerReasonAccepted, "the listener is valid")
	if l.notAccepted != nil {
		accepted = condFalse(string(gatewayv1.ListenerConditionAccepted), l.notAccepted.Reason, l.notAccepted.Message)
	}
	resolved := cond(gatewayv1.ListenerConditionResolvedRefs, true, gatewayv1.ListenerReasonResolvedRefs, "every reference resolved")
	if l.notResolved != nil {
		resolved = condFalse(string(gatewayv1.ListenerConditionResolvedRefs), l.notResolved.Reason, l.notResolved.Message)
	}
	conflicted := metav1.Condition{Type: string(gatewayv1.ListenerConditionConflicted), Status: metav1.ConditionFalse,
		Reason: string(gatewayv1.ListenerReasonNoConflicts), Message: "no conflicts"}
	if l.conflict != nil {
		conflicted.Status, conflicted.Reason, conflicted.Message = metav1.ConditionTrue, l.conflict.Reason, l.conflict.Message
	}
	prog := cond(gatewayv1.ListenerConditionProgrammed, true, gatewayv1.ListenerReasonProgrammed, "the device serves the listener")
	switch {
	case !l.valid():
		prog = condFalse(string(gatewayv1.ListenerConditionProgrammed), string(gatewayv1.ListenerReasonInvalid), "the listener is not valid")
	case !programmed:
		prog = condFalse(string(gatewayv1.ListenerConditionProgrammed), string(gatewayv1.ListenerReasonPending), "the device does not serve the listener yet")
	}
	kinds := l.kinds
	if kinds == nil {
		kinds = []gatewayv1.RouteGroupKind{}
	}
	return gatewayv1.ListenerStatus{Name: l.spec.Name, SupportedKinds: kinds, AttachedRoutes: l.attached,
		Conditions: []metav1.Condition{accepted, prog, resolved, conflicted}}
}

func cond[T ~string, R ~string](t T, ok bool, reason R, msg string) metav1.Condition {
	s := metav1.ConditionFalse
	if ok {
		s = metav1.ConditionTrue
	}
	return metav1.Condition{Type: string(t), Status: s, Reason: string(reason), Message: msg}
}

func condFalse(t, reason, msg string) metav1.Condition {
	return metav1.Condition{Type: t, Status: metav1.ConditionFalse, Reason: reason, Message: msg}
}

// addresses are the device's tailnet IPs (IPv4 first) and its MagicDNS
// name: clients may use any, and the conformance suite dials the first.
func addresses(dev proxyset.Device) []gatewayv1.GatewayStatusAddress {
	ips := append([]string(nil), dev.IPs...)
	sort.SliceStable(ips, func(i, j int) bool {
		a, errA := netip.ParseAddr(ips[i])
		b, errB := netip.ParseAddr(ips[j])
		return errA == nil && errB == nil && a.Is4() && !b.Is4()
	})
	ipType, hostType := gatewayv1.IPAddressType, gatewayv1.HostnameAddressType
	out := []gatewayv1.GatewayStatusAddress{}
	for _, ip := range ips {
		out = append(out, gatewayv1.GatewayStatusAddress{Type: &ipType, Value: ip})
	}
	if dev.FQDN != "" {
		out = append(out, gatewayv1.GatewayStatusAddress{Type: &hostType, Value: dev.FQDN})
	}
	return out
}
