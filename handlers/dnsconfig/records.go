package dnsconfig

import (
	"net/netip"
	"slices"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/tailplane/tailplane/handlers/lib/proxyset"
	"github.com/tailplane/tailplane/internal/nameserver"
	"github.com/tailplane/tailplane/internal/proxystate"
)

// AnnotationTailnetFQDN names an egress Service's tailnet target.
const AnnotationTailnetFQDN = "tailscale.com/tailnet-fqdn"

// The proxy roles (cluster.RoleEgress, cluster.RoleIngressL7) that get records.
const (
	roleEgress    = "egress"
	roleIngressL7 = "ingress-l7"
)

// The labels and annotation of an egress ProxyGroup member's cluster
// Service (handlers/proxygroup: LabelSvcType, SvcTypeEgress and the
// target annotation, which names the member's tailnet FQDN).
const (
	LabelSvcType         = "tailscale.com/svc-type"
	svcTypeEgress        = "egress"
	annotationTargetFQDN = "tailplane.dev/egress-target-fqdn"
)

// Parents finds the parent objects of proxies, by namespace and name
// (ParentOf), and holds the cluster Services of egress ProxyGroup members.
type Parents struct {
	Services  map[types.NamespacedName]*corev1.Service
	Ingresses map[types.NamespacedName]*networkingv1.Ingress
	// GroupEgress are the ClusterIP Services, in the operator namespace,
	// through which egress ProxyGroup members reach their group.
	GroupEgress []corev1.Service
}

// Records returns the nameserver's records for the operator's proxy Pods,
// as the official operator writes them: the MagicDNS name of a tailscale
// Ingress (its status hostname) and the tailnet-fqdn of an egress Service,
// each to the ready Pod IPs of its proxy. Those are the addresses a Pod that
// is not on the tailnet can use: the Ingress proxy serves it as tailnet
// clients are served, and the egress proxy forwards to the tailnet device.
// An egress Service served by a ProxyGroup gets, as in the official
// operator, the ClusterIPs of its cluster Service (which maps its ports to
// the group's replicas). Egress Services by tailnet IP and exposed Services
// get none, as in the official operator: their names are not MagicDNS
// names of these proxies.
func Records(pods []corev1.Pod, parents Parents) nameserver.Records {
	r := nameserver.Records{Version: nameserver.Version, IP4: map[string][]string{}, IP6: map[string][]string{}}
	for _, cs := range parents.GroupEgress {
		name := fqdn(cs.Annotations[annotationTargetFQDN])
		if cs.Labels[LabelSvcType] != svcTypeEgress || name == "" {
			continue
		}
		ips := cs.Spec.ClusterIPs
		if len(ips) == 0 && cs.Spec.ClusterIP != "" {
			ips = []string{cs.Spec.ClusterIP}
		}
		for _, ip := range ips {
			add(&r, name, ip)
		}
	}
	for i := range pods {
		p := &pods[i]
		if !ready(p) {
			continue
		}
		name := recordName(p, parents)
		if name == "" {
			continue
		}
		for _, ip := range p.Status.PodIPs {
			add(&r, name, ip.IP)
		}
	}
	if len(r.IP6) == 0 {
		r.IP6 = nil
	}
	return r
}

// add adds ip (skipped unless an address: "None", say) to name's records.
func add(r *nameserver.Records, name, ip string) {
	a, err := netip.ParseAddr(ip)
	if err != nil {
		return
	}
	if a.Is4() {
		r.IP4[name] = appendSorted(r.IP4[name], a.String())
	} else {
		r.IP6[name] = appendSorted(r.IP6[name], a.WithZone("").String())
	}
}

func appendSorted(list []string, s string) []string {
	if slices.Contains(list, s) {
		return list
	}
	list = append(list, s)
	slices.Sort(list)
	return list
}

// ParentOf is the key in Parents of a proxy Pod's parent, from its labels.
func ParentOf(p *corev1.Pod) types.NamespacedName {
	return types.NamespacedName{Namespace: p.Labels[proxystate.LabelParentNamespace], Name: p.Labels[proxystate.LabelParentName]}
}

// recordName is the name a proxy Pod answers for, "" for none.
func recordName(p *corev1.Pod, parents Parents) string {
	l := p.Labels
	if l[proxystate.LabelManaged] != "true" {
		return ""
	}
	key := ParentOf(p)
	switch l[proxyset.LabelProxyRole] {
	case roleEgress:
		if svc := parents.Services[key]; svc != nil {
			return fqdn(svc.Annotations[AnnotationTailnetFQDN])
		}
	case roleIngressL7:
		if ing := parents.Ingresses[key]; ing != nil && len(ing.Status.LoadBalancer.Ingress) > 0 {
			return fqdn(ing.Status.LoadBalancer.Ingress[0].Hostname)
		}
	}
	return ""
}

// fqdn is name without the trailing dot, lower case: the official records
// carry names as the Ingress status and the annotation spell them.
func fqdn(name string) string {
	if name == "" {
		return ""
	}
	c := nameserver.Canonical(name)
	return c[:len(c)-1]
}

// ready reports whether a Pod serves: Ready and not shutting down.
func ready(p *corev1.Pod) bool {
	if p.DeletionTimestamp != nil {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
