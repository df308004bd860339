package clusterdns

import (
	"context"
	"net/netip"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	listerscorev1 "k8s.io/client-go/listers/core/v1"
	listersdiscoveryv1 "k8s.io/client-go/listers/discovery/v1"
)

// ServiceLister answers Service names from shared informers of the
// cluster's Services and EndpointSlices.
type ServiceLister struct {
	services listerscorev1.ServiceLister
	slices   listersdiscoveryv1.EndpointSliceLister
}

// WatchServices starts informers of every Service and EndpointSlice,
// stopped when ctx ends, and returns their lister without waiting for the
// first list (a name asked before then is NXDOMAIN, as from CoreDNS while
// it starts).
func WatchServices(ctx context.Context, client kubernetes.Interface) *ServiceLister {
	f := informers.NewSharedInformerFactory(client, 0)
	l := &ServiceLister{services: f.Core().V1().Services().Lister(), slices: f.Discovery().V1().EndpointSlices().Lister()}
	f.Start(ctx.Done())
	return l
}

// Lookup answers as CoreDNS's kubernetes plugin: a Service's cluster IPs; a
// headless Service's ready endpoint addresses; an ExternalName Service's
// externalName, as a CNAME.
func (l *ServiceLister) Lookup(namespace, name string) (addrs []netip.Addr, cname string, ok bool) {
	svc, err := l.services.Services(namespace).Get(name)
	if err != nil {
		return nil, "", false
	}
	if svc.Spec.Type == corev1.ServiceTypeExternalName {
		return nil, svc.Spec.ExternalName, true
	}
	if svc.Spec.ClusterIP != corev1.ClusterIPNone {
		return clusterIPs(svc), "", true
	}
	sel := labels.SelectorFromSet(labels.Set{discoveryv1.LabelServiceName: name})
	eps, _ := l.slices.EndpointSlices(namespace).List(sel)
	for _, es := range eps {
		for _, ep := range es.Endpoints {
			if ep.Conditions.Ready != nil && !*ep.Conditions.Ready {
				continue
			}
			for _, a := range ep.Addresses {
				if ip, err := netip.ParseAddr(a); err == nil {
					addrs = append(addrs, ip)
				}
			}
		}
	}
	return addrs, "", true
}

func clusterIPs(svc *corev1.Service) []netip.Addr {
	ips := svc.Spec.ClusterIPs
	if len(ips) == 0 && svc.Spec.ClusterIP != "" {
		ips = []string{svc.Spec.ClusterIP}
	}
	var out []netip.Addr
	for _, s := range ips {
		if ip, err := netip.ParseAddr(s); err == nil {
			out = append(out, ip)
		}
	}
	return out
}
