package gatewayapi

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A listener whose certificate does not resolve is not programmed, but
// the routes that attach to it count in its attachedRoutes (the suite's
// GatewayWithAttachedRoutes): a route is attached, not served.
func TestRenderAttachedToUnresolvedListener(t *testing.T) {
	gw := gatewayFrom(t, `
metadata: {namespace: default, name: gw, generation: 1}
spec:
  gatewayClassName: tailscale
  listeners:
  - name: tls
    port: 443
    protocol: HTTPS
    tls: {mode: Terminate, certificateRefs: [{group: "", kind: Secret, name: does-not-exist}]}
`)
	r := routeFrom(t, KindHTTPRoute, `
metadata: {namespace: default, name: app, generation: 1}
spec:
  parentRefs: [{name: gw, sectionName: tls}]
  rules:
  - backendRefs: [{name: web, port: 8080}]
`)
	res := render(t, gw, newCluster(), nil, r)
	st := Status(gw, res, Proxy{Programmed: true})
	if len(st.Listeners) != 1 || st.Listeners[0].AttachedRoutes != 1 {
		t.Fatalf("listeners %+v, want one with 1 attached route", st.Listeners)
	}
	for _, c := range st.Listeners[0].Conditions {
		if (c.Type == "ResolvedRefs" || c.Type == "Programmed") && c.Status != metav1.ConditionFalse {
			t.Errorf("listener condition %+v, want False", c)
		}
	}
	if c := routeCondition(t, res, r, "Accepted"); c.Status != metav1.ConditionTrue {
		t.Errorf("route Accepted %+v", c)
	}
	if res.Config != nil {
		for _, l := range res.Config.Listeners {
			if len(l.HTTPRoutes) != 0 {
				t.Errorf("an unresolved listener is programmed: %+v", l)
			}
		}
	}
}

// A TLS listener that terminates TLS is not supported: not accepted, with
// reason UnsupportedValue, and no supported kinds (the suite's
// TLSRouteListenerTerminateNotSupported).
func TestRenderTLSTerminateListener(t *testing.T) {
	gw := gatewayFrom(t, `
metadata: {namespace: default, name: gw, generation: 1}
spec:
  gatewayClassName: tailscale
  listeners:
  - {name: tls-terminate, port: 443, protocol: TLS, tls: {mode: Terminate}}
`)
	st := Status(gw, render(t, gw, newCluster(), nil), Proxy{Programmed: true})
	if len(st.Listeners) != 1 || st.Listeners[0].SupportedKinds == nil || len(st.Listeners[0].SupportedKinds) != 0 {
		t.Fatalf("listeners %+v, want one with no supported kinds", st.Listeners)
	}
	for _, c := range st.Listeners[0].Conditions {
		if c.Type == "Accepted" && (c.Status != metav1.ConditionFalse || c.Reason != "UnsupportedValue") {
			t.Errorf("listener Accepted %+v", c)
		}
	}
}
