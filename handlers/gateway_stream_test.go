package handlers_test

import (
	"fmt"
	"net"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tailplane/tailplane/handlers/gateway"
	"github.com/tailplane/tailplane/handlers/lib/resources"
	"github.com/tailplane/tailplane/internal/testpoll"
)

// streamBackends are the Backends of the Gateway's listener named
// listener in its proxy config, as "<service> <address>" ("invalid" for
// an address when Invalid).
func (h *harness) streamBackends(gw, listener string) ([]string, error) {
	cfg, err := h.proxyConfig(gateway.ParentType, gw)
	if err != nil {
		return nil, err
	}
	if cfg.Gateway == nil {
		return nil, fmt.Errorf("config without a gateway: %+v", cfg)
	}
	for _, l := range cfg.Gateway.Listeners {
		if l.Name != listener {
			continue
		}
		var out []string
		for _, b := range l.Backends {
			addr := b.Address
			if b.Invalid {
				addr = "invalid"
			}
			out = append(out, b.Service+" "+addr)
		}
		return out, nil
	}
	return nil, fmt.Errorf("no listener %s in %+v", listener, cfg.Gateway.Listeners)
}

// TCPRoutes and UDPRoutes on a Gateway's TCP and UDP listeners: each
// listener relays to its route's Service (proxy/gateway_tls_test.go
// relays real connections and datagrams through such a config); a route
// naming the other protocol's listener is NotAllowedByListeners; a
// backend that goes is BackendNotFound and kept as an invalid share; a
// route deleted leaves its listener without backends.
func TestGatewayTCPAndUDPRoutes(t *testing.T) {
	const class = "tailscale-gw-stream"
	h := newGatewayHarness(t, class, false)
	ns := h.ns
	h.createService(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "db"},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 5432, Protocol: corev1.ProtocolTCP}}}})
	h.createService(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "dns"},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 53, Protocol: corev1.ProtocolUDP}}}})
	h.applyYAML(resources.Gateways, ns, fmt.Sprintf(`
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: gw}
spec:
  gatewayClassName: %s
  listeners:
  - {name: tcp, port: 5432, protocol: TCP}
  - {name: udp, port: 53, protocol: UDP}
`, class))
	// route is a TCPRoute or UDPRoute on the listener named section,
	// relaying to Service backend.
	route := func(kind, name, section, backend string, port int) string {
		return fmt.Sprintf(`
apiVersion: gateway.networking.k8s.io/v1
kind: %s
metadata: {name: %s}
spec:
  parentRefs: [{name: gw, sectionName: %s}]
  rules: [{backendRefs: [{name: %s, port: %d}]}]
`, kind, name, section, backend, port)
	}
	h.applyYAML(resources.TCPRoutes, ns, route("TCPRoute", "db", "tcp", "db", 5432))
	h.applyYAML(resources.UDPRoutes, ns, route("UDPRoute", "dns", "udp", "dns", 53))
	h.applyYAML(resources.UDPRoutes, ns, route("UDPRoute", "wrong-listener", "tcp", "dns", 53))
	db, dns := h.service("db"), h.service("dns")
	wantBackends := func(listener string, want ...string) {
		t.Helper()
		testpoll.Until(t, settle, fmt.Sprintf("listener %s relays to %v", listener, want), func() error {
			got, err := h.streamBackends("gw", listener)
			if err == nil && fmt.Sprint(got) != fmt.Sprint(want) {
				err = fmt.Errorf("backends %v", got)
			}
			return err
		})
	}
	wantBackends("tcp", ns+"/db:5432 "+net.JoinHostPort(db.Spec.ClusterIP, "5432"))
	wantBackends("udp", ns+"/dns:53 "+net.JoinHostPort(dns.Spec.ClusterIP, "53"))
	h.wantRouteParentsOf(resources.TCPRoutes, ns, "db", "gw: Accepted/ResolvedRefs")
	h.wantRouteParentsOf(resources.UDPRoutes, ns, "dns", "gw: Accepted/ResolvedRefs")
	h.wantRouteParentsOf(resources.UDPRoutes, ns, "wrong-listener", "gw: NotAllowedByListeners/ResolvedRefs")
	testpoll.Until(t, settle, "one route attached to each listener", func() error {
		gw, err := h.gatewayStatus(ns, "gw")
		if err != nil {
			return err
		}
		got := map[string]int32{}
		for _, l := range gw.Status.Listeners {
			got[string(l.Name)] = l.AttachedRoutes
		}
		if fmt.Sprint(got) != fmt.Sprint(map[string]int32{"tcp": 1, "udp": 1}) {
			return fmt.Errorf("attached routes %v", got)
		}
		return nil
	})

	// The TCP backend goes: the route says so, the share stays, invalid.
	if err := h.kube.CoreV1().Services(ns).Delete(h.ctx(), "db", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	h.wantRouteParentsOf(resources.TCPRoutes, ns, "db", "gw: Accepted/BackendNotFound")
	wantBackends("tcp", ns+"/db:5432 invalid")

	// The UDPRoute deleted: its listener relays nowhere; the TCP one is
	// untouched.
	if err := h.dyn.Resource(resources.UDPRoutes).Namespace(ns).Delete(h.ctx(), "dns", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	wantBackends("udp")
	wantBackends("tcp", ns+"/db:5432 invalid")
}
