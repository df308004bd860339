package node

import (
	"net/netip"
	"os"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The pod's resolv.conf follows the kubelet's rules for each dnsPolicy.
func TestResolvConf(t *testing.T) {
	host := filepath.Join(t.TempDir(), "resolv.conf")
	if err := os.WriteFile(host, []byte("# host\nnameserver 10.255.255.53\nsearch corp.example\noptions edns0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	old := hostResolvConf
	hostResolvConf = host
	defer func() { hostResolvConf = old }()
	dnsIP := netip.MustParseAddr("198.18.3.1")
	five, two := "5", "2"
	for _, tc := range []struct {
		name   string
		spec   corev1.PodSpec
		noDNS  bool
		want   string
		wantOK bool
	}{
		{name: "default is ClusterFirst", spec: corev1.PodSpec{}, wantOK: true,
			want: "nameserver 198.18.3.1\nsearch team.svc.cluster.local svc.cluster.local cluster.local corp.example\noptions ndots:5\n"},
		{name: "host network keeps the host's", spec: corev1.PodSpec{HostNetwork: true}},
		{name: "ClusterFirstWithHostNet", spec: corev1.PodSpec{HostNetwork: true, DNSPolicy: corev1.DNSClusterFirstWithHostNet}, wantOK: true,
			want: "nameserver 198.18.3.1\nsearch team.svc.cluster.local svc.cluster.local cluster.local corp.example\noptions ndots:5\n"},
		{name: "Default", spec: corev1.PodSpec{DNSPolicy: corev1.DNSDefault}},
		{name: "no cluster DNS", spec: corev1.PodSpec{}, noDNS: true},
		{name: "None with dnsConfig", wantOK: true, spec: corev1.PodSpec{DNSPolicy: corev1.DNSNone, DNSConfig: &corev1.PodDNSConfig{
			Nameservers: []string{"192.0.2.53"}, Searches: []string{"a.test"}, Options: []corev1.PodDNSConfigOption{{Name: "ndots", Value: &two}}}},
			want: "nameserver 192.0.2.53\nsearch a.test\noptions ndots:2\n"},
		{name: "ClusterFirst with dnsConfig", wantOK: true, spec: corev1.PodSpec{DNSConfig: &corev1.PodDNSConfig{
			Nameservers: []string{"192.0.2.53", "198.18.3.1"}, Options: []corev1.PodDNSConfigOption{{Name: "ndots", Value: &five}, {Name: "trust-ad"}}}},
			want: "nameserver 198.18.3.1\nnameserver 192.0.2.53\nsearch team.svc.cluster.local svc.cluster.local cluster.local corp.example\noptions ndots:5 trust-ad\n"},
		{name: "Default with dnsConfig", wantOK: true, spec: corev1.PodSpec{DNSPolicy: corev1.DNSDefault, DNSConfig: &corev1.PodDNSConfig{Searches: []string{"b.test"}}},
			want: "nameserver 10.255.255.53\nsearch corp.example b.test\noptions edns0\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "team"}, Spec: tc.spec}
			ip := dnsIP
			if tc.noDNS {
				ip = netip.Addr{}
			}
			got, ok := resolvConf(pod, ip, "cluster.local")
			if ok != tc.wantOK || got != tc.want {
				t.Fatalf("resolvConf = %q, %v; want %q, %v", got, ok, tc.want, tc.wantOK)
			}
		})
	}
}
