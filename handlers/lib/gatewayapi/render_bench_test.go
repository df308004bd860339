package gatewayapi

import (
	"encoding/json"
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/tailplane/tailplane/proxy/config"
)

// routes are n HTTPRoutes on Gateway default/gw, each with one rule: an
// Exact path, a header match and a weighted pair of backends, as a large
// tenant's routes look.
func benchRoutes(n int) []*Route {
	out := make([]*Route, n)
	port := gatewayv1.PortNumber(8080)
	w90, w10 := int32(90), int32(10)
	exact := gatewayv1.PathMatchExact
	for i := range out {
		path := fmt.Sprintf("/app-%d", i)
		hr := &gatewayv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: fmt.Sprintf("r%04d", i)},
			Spec: gatewayv1.HTTPRouteSpec{
				CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: []gatewayv1.ParentReference{{Name: "gw"}}},
				Rules: []gatewayv1.HTTPRouteRule{{
					Matches: []gatewayv1.HTTPRouteMatch{{Path: &gatewayv1.HTTPPathMatch{Type: &exact, Value: &path},
						Headers: []gatewayv1.HTTPHeaderMatch{{Name: "x-tenant", Value: fmt.Sprint(i)}}}},
					BackendRefs: []gatewayv1.HTTPBackendRef{
						{BackendRef: gatewayv1.BackendRef{BackendObjectReference: gatewayv1.BackendObjectReference{Name: "web", Port: &port}, Weight: &w90}},
						{BackendRef: gatewayv1.BackendRef{BackendObjectReference: gatewayv1.BackendObjectReference{Name: "canary", Port: &port}, Weight: &w10}},
					},
				}},
			}}
		out[i] = &Route{Kind: KindHTTPRoute, ObjectMeta: hr.ObjectMeta, ParentRefs: hr.Spec.ParentRefs, HTTP: hr}
	}
	return out
}

// BenchmarkRender resolves a Gateway with 10 and with 1,000 HTTPRoutes
// into its proxy config (what the operator does on every change of one of
// them) and reports the config's JSON size: the proxy's config Secret must
// stay well under the 1 MiB object limit.
func BenchmarkRender(b *testing.B) {
	for _, n := range []int{10, 1000} {
		b.Run(fmt.Sprintf("routes=%d", n), func(b *testing.B) {
			gw := &gatewayv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "gw"},
				Spec: gatewayv1.GatewaySpec{Listeners: []gatewayv1.Listener{{Name: "http", Port: 80, Protocol: gatewayv1.HTTPProtocolType}}}}
			in := Inputs{Routes: benchRoutes(n), Lookups: newCluster().lookups(), CertificateName: func(l string) string { return l }}
			var size int
			for b.Loop() {
				res, err := Render(gw, in)
				if err != nil {
					b.Fatal(err)
				}
				doc, err := json.Marshal(&config.Config{Version: config.Version, Hostname: "gw", Role: config.RoleGateway, Gateway: res.Config})
				if err != nil {
					b.Fatal(err)
				}
				size = len(doc)
			}
			b.ReportMetric(float64(size), "config-bytes")
		})
	}
}
