package clusterdns

import (
	"context"
	"net/netip"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// The informer-backed lister answers a ClusterIP Service, a headless one
// with its ready endpoints only, and an ExternalName.
func TestServiceLister(t *testing.T) {
	yes, no := true, false
	client := fake.NewClientset(
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "web"}, Spec: corev1.ServiceSpec{ClusterIP: "127.96.0.5", ClusterIPs: []string{"127.96.0.5"}}},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "db"}, Spec: corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone}},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "alias"}, Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "web.a.svc.cluster.local"}},
		&discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "db-x", Labels: map[string]string{discoveryv1.LabelServiceName: "db"}},
			AddressType: discoveryv1.AddressTypeIPv4, Endpoints: []discoveryv1.Endpoint{
				{Addresses: []string{"198.18.0.7"}, Conditions: discoveryv1.EndpointConditions{Ready: &yes}},
				{Addresses: []string{"198.18.0.8"}, Conditions: discoveryv1.EndpointConditions{Ready: &no}},
			}},
	)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	l := WatchServices(ctx, client)
	for {
		if _, _, ok := l.Lookup("a", "db"); ok {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatal("the informer never listed the Services")
		case <-time.After(20 * time.Millisecond):
		}
	}
	var addrs []netip.Addr
	var cname string
	var ok bool
	for ctx.Err() == nil { // the slices' informer may list after the Services'
		if addrs, _, _ = l.Lookup("a", "db"); len(addrs) > 0 {
			break
		}
		select {
		case <-ctx.Done():
		case <-time.After(20 * time.Millisecond):
		}
	}
	if !slices.Equal(addrs, []netip.Addr{netip.MustParseAddr("198.18.0.7")}) {
		t.Fatalf("headless db: %v", addrs)
	}
	if addrs, cname, ok = l.Lookup("a", "web"); !ok || cname != "" || !slices.Equal(addrs, []netip.Addr{netip.MustParseAddr("127.96.0.5")}) {
		t.Fatalf("web: %v %q %v", addrs, cname, ok)
	}
	if addrs, cname, ok = l.Lookup("a", "alias"); !ok || cname != "web.a.svc.cluster.local" || len(addrs) != 0 {
		t.Fatalf("alias: %v %q %v", addrs, cname, ok)
	}
	if _, _, ok = l.Lookup("b", "web"); ok {
		t.Fatal("b/web found")
	}
}
