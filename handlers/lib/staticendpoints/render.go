// Package staticendpoints serves ProxyClass spec.staticEndpoints for
// ProxyGroups, as the official operator does: every replica of a group gets
// a NodePort Service "<statefulset>-<ordinal>-nodeport" whose UDP node port,
// from the class's ranges, forwards to the replica's WireGuard port
// (listenPort, one for the whole group); the replica advertises up to two
// "<node ExternalIP>:<node port>" endpoints of the nodes the class selects.
// handlers/proxygroup calls Plan for each group's plan and SetStatus for its
// status.
//
// render.go is pure (names, port allocation, endpoint choice, the Service);
// apply.go reads the cluster and changes the plan. It may import crds/,
// handlers/lib/cluster, groupmember, pipeline, proxyset, resources,
// internal/proxystate, proxy/config and runtime.
package staticendpoints

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/tailplane/tailplane/crds/tailscale/v1alpha1"
)

const (
	// staticEndpointPortName is the NodePort Services' one port's name.
	staticEndpointPortName = "static-endpoint-port"
	// maxStaticEndpoints is how many endpoints a replica advertises.
	maxStaticEndpoints = 2
	// listenPortMin and listenPortMax bound the replicas' WireGuard port
	// when the group has none yet.
	listenPortMin, listenPortMax = 1024, 65535
	// podNameLabel is the label the StatefulSet controller gives each Pod
	// with its own name: a NodePort Service selects one replica by it.
	podNameLabel = "statefulset.kubernetes.io/pod-name"
)

// Messages of a group whose static endpoints cannot be set up (reason
// ProxyGroupCreationFailed), the official ones.
const (
	msgNodePortsPrefix = "error provisioning NodePort Services for static endpoints: "
	msgEndpointsPrefix = "error provisioning config Secrets: "
	msgNotEnoughPorts  = "failed to allocate NodePorts to ProxyGroup Services: not enough available ports to allocate all replicas (needed %d, got %d). Field 'spec.staticEndpoints.nodePort.ports' on ProxyClass %q must have bigger range allocated"
	msgNoNodes         = "failed to match nodes to configured Selectors on `spec.staticEndpoints.nodePort.selectors` field for ProxyClass %q"
	msgNoExternalIP    = "failed to find any `status.addresses` of type %q on nodes using configured Selectors on `spec.staticEndpoints.nodePort.selectors` for ProxyClass %q"
)

// nodePortServiceName is the NodePort Service of replica ordinal of the
// StatefulSet base: "<base>-<ordinal>-nodeport", as the official names it
// after its StatefulSet, with base's readable part shortened where the name
// would pass the 63 characters of a Service name (its hash part stays).
func nodePortServiceName(base string, ordinal int) string {
	suffix := fmt.Sprintf("-%d-nodeport", ordinal)
	if over := len(base) + len(suffix) - validation.DNS1035LabelMaxLength; over > 0 {
		cut := strings.LastIndex(base, "-")
		base = strings.TrimRight(base[:max(cut-over, 0)], "-") + base[cut:]
	}
	return base + suffix
}

// nodePortOrdinal is the replica a static endpoint Service of the
// StatefulSet base selects; false for other Services.
func nodePortOrdinal(s *corev1.Service, base string) (int, bool) {
	if s.Spec.Type != corev1.ServiceTypeNodePort || !strings.HasSuffix(s.Name, "-nodeport") {
		return 0, false
	}
	n, ok := strings.CutPrefix(s.Spec.Selector[podNameLabel], base+"-")
	if !ok {
		return 0, false
	}
	i, err := strconv.Atoi(n)
	return i, err == nil && i >= 0
}

// inRanges reports whether port lies in one of ranges.
func inRanges(ranges []v1alpha1.PortRange, port uint16) bool {
	return slices.ContainsFunc(ranges, func(r v1alpha1.PortRange) bool { return r.Port <= port && port <= end(r) })
}

func end(r v1alpha1.PortRange) uint16 {
	if r.EndPort == 0 {
		return r.Port
	}
	return r.EndPort
}

// allocateNodePorts gives each of the group's replicas (its NodePort
// Services' names, in ordinal order) a node port from ranges: the one its
// Service has (mine) while it is in ranges, else the lowest port no
// ProxyGroup Service holds (used). It fails with the official message when
// the ranges run out.
func allocateNodePorts(services []string, ranges []v1alpha1.PortRange, mine, used map[string]uint16, class string) (map[string]uint16, error) {
	taken := map[uint16]bool{}
	for _, p := range used {
		taken[p] = true
	}
	out := map[string]uint16{}
	for _, s := range services {
		if p, ok := mine[s]; ok && inRanges(ranges, p) {
			out[s] = p
			taken[p] = true
		}
	}
	sorted := slices.Clone(ranges)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Port < sorted[j].Port })
	for _, s := range services {
		if _, ok := out[s]; ok {
			continue
		}
	search:
		for _, r := range sorted {
			for p := int(r.Port); p <= int(end(r)); p++ {
				if !taken[uint16(p)] {
					out[s], taken[uint16(p)] = uint16(p), true
					break search
				}
			}
		}
	}
	if len(out) < len(services) {
		return nil, fmt.Errorf(msgNotEnoughPorts, len(services), len(out), class)
	}
	return out, nil
}

// pickListenPort is the group's WireGuard port: the one its NodePort
// Services forward to already, else a random one (as the official picks).
func pickListenPort(existing []corev1.Service) int32 {
	for _, s := range existing {
		if len(s.Spec.Ports) == 1 && s.Spec.Ports[0].Port != 0 {
			return s.Spec.Ports[0].Port
		}
	}
	return int32(listenPortMin + rand.IntN(listenPortMax-listenPortMin+1))
}

// staticEndpoints are up to two "ip:port" endpoints on the ExternalIP
// addresses of nodes (those the class selects), with port: the ones the
// replica advertises already (current) first, in their order, then others
// in the order of the nodes' names.
func staticEndpoints(nodes []corev1.Node, port uint16, current []string, class string) ([]string, error) {
	if len(nodes) == 0 {
		return nil, fmt.Errorf(msgNoNodes, class)
	}
	nodes = slices.Clone(nodes)
	sort.Slice(nodes, func(i, j int) bool { return nodes[i].Name < nodes[j].Name })
	var found []string
	for _, n := range nodes {
		for _, a := range n.Status.Addresses {
			if a.Type != corev1.NodeExternalIP {
				continue
			}
			ip, err := netip.ParseAddr(a.Address)
			if err != nil {
				continue
			}
			if ep := netip.AddrPortFrom(ip, port).String(); !slices.Contains(found, ep) {
				found = append(found, ep)
			}
		}
	}
	if len(found) == 0 {
		return nil, fmt.Errorf(msgNoExternalIP, corev1.NodeExternalIP, class)
	}
	var out []string
	for _, ep := range current {
		if slices.Contains(found, ep) && len(out) < maxStaticEndpoints {
			out = append(out, ep)
		}
	}
	for _, ep := range found {
		if !slices.Contains(out, ep) && len(out) < maxStaticEndpoints {
			out = append(out, ep)
		}
	}
	return out, nil
}

// nodePortService is replica ordinal's NodePort Service: UDP nodePort to the
// replica's listenPort, selecting the replica's Pod by its name (base is
// the StatefulSet's name), with the proxy's labels (what deletes it with
// the group).
func nodePortService(namespace, base string, ordinal int, labels map[string]string, listenPort int32, nodePort uint16) *corev1.Service {
	return &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{Name: nodePortServiceName(base, ordinal), Namespace: namespace, Labels: labels},
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeNodePort,
			Selector: map[string]string{podNameLabel: fmt.Sprintf("%s-%d", base, ordinal)},
			Ports: []corev1.ServicePort{{
				Name: staticEndpointPortName, Protocol: corev1.ProtocolUDP,
				Port: listenPort, TargetPort: intstr.FromInt32(listenPort), NodePort: int32(nodePort),
			}},
		},
	}
}
