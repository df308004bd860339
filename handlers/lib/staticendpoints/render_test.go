package staticendpoints

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tailplane/tailplane/crds/tailscale/v1alpha1"
)

func TestAllocateNodePortsKeepsPortsAndTakesTheLowestFree(t *testing.T) {
	ranges := []v1alpha1.PortRange{{Port: 30010, EndPort: 30012}, {Port: 30001}}
	svcs := []string{"pg-0-nodeport", "pg-1-nodeport", "pg-2-nodeport"}
	got, err := allocateNodePorts(svcs, ranges,
		map[string]uint16{"pg-1-nodeport": 30011, "pg-2-nodeport": 31000}, // 31000 left the ranges
		map[string]uint16{"other-0-nodeport": 30001}, "pc")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]uint16{"pg-0-nodeport": 30010, "pg-1-nodeport": 30011, "pg-2-nodeport": 30012}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}

func TestAllocateNodePortsOutOfPorts(t *testing.T) {
	_, err := allocateNodePorts([]string{"pg-0-nodeport", "pg-1-nodeport"}, []v1alpha1.PortRange{{Port: 30001, EndPort: 30002}},
		nil, map[string]uint16{"other-0-nodeport": 30002}, "pc")
	want := `failed to allocate NodePorts to ProxyGroup Services: not enough available ports to allocate all replicas (needed 2, got 1). Field 'spec.staticEndpoints.nodePort.ports' on ProxyClass "pc" must have bigger range allocated`
	if err == nil || err.Error() != want {
		t.Fatalf("got %v, want %s", err, want)
	}
}

func node(name string, addrs ...corev1.NodeAddress) corev1.Node {
	return corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: corev1.NodeStatus{Addresses: addrs}}
}

func external(ip string) corev1.NodeAddress {
	return corev1.NodeAddress{Type: corev1.NodeExternalIP, Address: ip}
}

func TestStaticEndpointsKeepCurrentOnesFirstAndAtMostTwo(t *testing.T) {
	nodes := []corev1.Node{
		node("c", external("203.0.113.3")),
		node("a", corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: "10.0.0.1"}, external("203.0.113.1")),
		node("b", external("203.0.113.2"), external("not-an-ip"), external("2001:db8::2")),
	}
	got, err := staticEndpoints(nodes, 30001, nil, "pc")
	if err != nil || !slices.Equal(got, []string{"203.0.113.1:30001", "203.0.113.2:30001"}) {
		t.Fatalf("new: %v %v", got, err)
	}
	// The endpoints a replica advertises stay while their nodes do.
	got, err = staticEndpoints(nodes, 30001, []string{"203.0.113.3:30001", "198.51.100.9:30001"}, "pc")
	if err != nil || !slices.Equal(got, []string{"203.0.113.3:30001", "203.0.113.1:30001"}) {
		t.Fatalf("kept: %v %v", got, err)
	}
	got, err = staticEndpoints(nodes[2:], 30001, nil, "pc")
	if err != nil || !slices.Equal(got, []string{"203.0.113.2:30001", "[2001:db8::2]:30001"}) {
		t.Fatalf("IPv6: %v %v", got, err)
	}
}

func TestStaticEndpointsWithoutNodesOrExternalIPs(t *testing.T) {
	_, err := staticEndpoints(nil, 30001, nil, "pc")
	if want := "failed to match nodes to configured Selectors on `spec.staticEndpoints.nodePort.selectors` field for ProxyClass \"pc\""; err == nil || err.Error() != want {
		t.Fatalf("no nodes: %v", err)
	}
	_, err = staticEndpoints([]corev1.Node{node("a", corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: "10.0.0.1"})}, 30001, nil, "pc")
	if want := "failed to find any `status.addresses` of type \"ExternalIP\" on nodes using configured Selectors on `spec.staticEndpoints.nodePort.selectors` for ProxyClass \"pc\""; err == nil || err.Error() != want {
		t.Fatalf("no ExternalIP: %v", err)
	}
}

func TestNodePortServiceSelectsOneReplica(t *testing.T) {
	s := nodePortService("tailscale", "pg", 1, map[string]string{"x": "y"}, 41641, 30002)
	p := s.Spec.Ports[0]
	if s.Name != "pg-1-nodeport" || s.Spec.Type != corev1.ServiceTypeNodePort || s.Spec.Selector[podNameLabel] != "pg-1" ||
		p.Protocol != corev1.ProtocolUDP || p.Port != 41641 || p.TargetPort.IntVal != 41641 || p.NodePort != 30002 || p.Name != "static-endpoint-port" {
		t.Fatalf("%+v", s)
	}
	if i, ok := nodePortOrdinal(s, "pg"); !ok || i != 1 {
		t.Errorf("nodePortOrdinal = %d %v", i, ok)
	}
	if _, ok := nodePortOrdinal(s, "p"); ok {
		t.Errorf("nodePortOrdinal of another StatefulSet")
	}
	long := "ts-" + strings.Repeat("a", 40) + "-0123abcd"
	if n := nodePortServiceName(long, 123); len(n) != 63 || !strings.HasSuffix(n, "a-0123abcd-123-nodeport") {
		t.Errorf("long name %q (%d)", n, len(n))
	}
}

func TestPickListenPortKeepsTheGroups(t *testing.T) {
	kept := []corev1.Service{*nodePortService("ns", "pg", 0, nil, 50000, 30001)}
	if p := pickListenPort(kept); p != 50000 {
		t.Fatalf("got %d", p)
	}
	if p := pickListenPort(nil); p < listenPortMin || p > listenPortMax {
		t.Fatalf("random %d", p)
	}
}
