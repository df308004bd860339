package groupmember

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"

	"github.com/tailplane/tailplane/handlers/lib/proxyset"
	"github.com/tailplane/tailplane/proxy/config"
)

// Labels and annotations of the cluster Services made for egress members,
// with the official operator's names where it has them.
const (
	// LabelProxyGroup names the group on a member's cluster Service.
	LabelProxyGroup = "tailscale.com/proxy-group"
	labelSvcType    = "tailscale.com/svc-type"
	svcTypeEgress   = "egress"
	// annotationTargetFQDN and annotationTargetIP record a member's
	// tailnet target on its cluster Service, from which the group's
	// replicas are configured.
	annotationTargetFQDN = "tailplane.dev/egress-target-fqdn"
	annotationTargetIP   = "tailplane.dev/egress-target-ip"

	// egressPortMin and egressPortMax bound the ports the replicas listen
	// on, one per member port, unique in a group (the official range).
	egressPortMin, egressPortMax = 10000, 11000
)

// Egress is an ExternalName Service with a tailnet target served by an
// egress ProxyGroup.
type Egress struct {
	Namespace, Name, Group string
	// Target is the tailnet destination (FQDN or IP), without ports.
	Target config.EgressTarget
	// Ports are the Service's ports.
	Ports []corev1.ServicePort
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
	l[LabelProxyGroup] = group
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
func ClusterService(m *Egress, namespace string, existing *corev1.Service, taken map[int32]bool) (*corev1.Service, error) {
	kept := map[string]int32{}
	if existing != nil {
		for _, p := range existing.Spec.Ports {
			if !taken[p.TargetPort.IntVal] { // another member's since: moved
				kept[portKey(p)] = p.TargetPort.IntVal
			}
		}
	}
	used := func(port int32) bool { return taken[port] || slices.Contains(slices.Collect(maps.Values(kept)), port) }
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

// UpToDate reports whether the cluster Service cur already is want.
func UpToDate(cur, want *corev1.Service) bool {
	return slices.Equal(cur.Spec.Ports, want.Spec.Ports) && maps.Equal(cur.Annotations, want.Annotations) &&
		cur.Labels[LabelProxyGroup] == want.Labels[LabelProxyGroup]
}

// TargetOf is what the group's replicas serve for one cluster Service:
// listen on its target ports, dial its tailnet target on its ports.
func TargetOf(cs *corev1.Service) (config.EgressTarget, bool) {
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

// ClusterServices are the cluster Services of the group's egress members
// in namespace (the operator's), sorted by name: the record of the ports
// the group allocated.
func ClusterServices(ctx context.Context, kube kubernetes.Interface, namespace, group string) ([]corev1.Service, error) {
	sel := labels.SelectorFromSet(labels.Set{LabelProxyGroup: group, labelSvcType: svcTypeEgress}).String()
	list, err := kube.CoreV1().Services(namespace).List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return nil, fmt.Errorf("list egress Services of ProxyGroup %s: %w", group, err)
	}
	sort.Slice(list.Items, func(i, j int) bool { return list.Items[i].Name < list.Items[j].Name })
	return list.Items, nil
}
