package dnsconfig_test

import (
	"reflect"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/tailplane/tailplane/crds/tailscale/v1alpha1"
	"github.com/tailplane/tailplane/handlers/dnsconfig"
	"github.com/tailplane/tailplane/handlers/egress"
	"github.com/tailplane/tailplane/handlers/lib/groupmember"
	"github.com/tailplane/tailplane/handlers/lib/proxyset"
	"github.com/tailplane/tailplane/handlers/lib/settings"
	"github.com/tailplane/tailplane/internal/nameserver"
)

func dc(ns *v1alpha1.Nameserver) *v1alpha1.DNSConfig {
	return &v1alpha1.DNSConfig{
		TypeMeta:   metav1.TypeMeta{APIVersion: "tailscale.com/v1alpha1", Kind: "DNSConfig"},
		ObjectMeta: metav1.ObjectMeta{Name: "ts-dns", UID: "u1"},
		Spec:       v1alpha1.DNSConfigSpec{Nameserver: ns},
	}
}

func TestRenderRunsTheProxyImageAsNameserver(t *testing.T) {
	s := settings.Settings{Namespace: "tailscale", ProxyImage: "ghcr.io/tailplane/tailplane-proxy:v1.2.3"}
	objs := dnsconfig.Render(dc(&v1alpha1.Nameserver{}), s, `{"version":"v1alpha1","ip4":{}}`)
	if len(objs) != 4 {
		t.Fatalf("%d objects, want ServiceAccount, ConfigMap, Deployment, Service", len(objs))
	}
	sa, cm, d, svc := objs[0].(*corev1.ServiceAccount), objs[1].(*corev1.ConfigMap), objs[2].(*appsv1.Deployment), objs[3].(*corev1.Service)
	for _, m := range []metav1.ObjectMeta{sa.ObjectMeta, cm.ObjectMeta, d.ObjectMeta, svc.ObjectMeta} {
		if m.Namespace != "tailscale" || len(m.OwnerReferences) != 1 || m.OwnerReferences[0].UID != "u1" || m.Labels["tailscale.com/parent-resource-type"] != "nameserver" {
			t.Errorf("%s: namespace %q, owners %v, labels %v", m.Name, m.Namespace, m.OwnerReferences, m.Labels)
		}
	}
	if sa.Name != "nameserver" || sa.AutomountServiceAccountToken == nil || *sa.AutomountServiceAccountToken {
		t.Errorf("ServiceAccount %s mounts a token: the nameserver needs none", sa.Name)
	}
	if cm.Name != "dnsrecords" || cm.Data["records.json"] == "" {
		t.Errorf("ConfigMap %s data %v", cm.Name, cm.Data)
	}
	c := d.Spec.Template.Spec.Containers[0]
	if c.Image != s.ProxyImage || !reflect.DeepEqual(c.Args, []string{"nameserver"}) || *d.Spec.Replicas != 1 {
		t.Errorf("container image %s args %v replicas %d; want the proxy image running `nameserver`, 1 replica", c.Image, c.Args, *d.Spec.Replicas)
	}
	if c.VolumeMounts[0].MountPath != "/config" || d.Spec.Template.Spec.Volumes[0].ConfigMap.Name != "dnsrecords" {
		t.Errorf("records not mounted at /config: %v", c.VolumeMounts)
	}
	if d.Spec.Template.Spec.ServiceAccountName != "nameserver" || *d.Spec.Template.Spec.AutomountServiceAccountToken {
		t.Error("the Pod must run as ServiceAccount nameserver without a token")
	}
	for _, p := range svc.Spec.Ports {
		if p.Port != 53 || p.TargetPort.IntValue() != 1053 {
			t.Errorf("Service port %v, want 53 -> 1053", p)
		}
	}
	if svc.Spec.Selector["app"] != "nameserver" || d.Spec.Template.Labels["app"] != "nameserver" || svc.Spec.ClusterIP != "" {
		t.Errorf("Service selector %v, Pod labels %v, ClusterIP %q", svc.Spec.Selector, d.Spec.Template.Labels, svc.Spec.ClusterIP)
	}
}

func TestRenderTakesTheSpec(t *testing.T) {
	two := int32(2)
	ns := &v1alpha1.Nameserver{
		Image: &v1alpha1.NameserverImage{Repo: "tailscale/k8s-nameserver"}, Replicas: &two,
		Service: &v1alpha1.NameserverService{ClusterIP: "10.0.0.53"},
		Pod:     &v1alpha1.NameserverPod{NodeSelector: map[string]string{"pool": "dns"}, Tolerations: []corev1.Toleration{{Key: "dns"}}},
	}
	objs := dnsconfig.Render(dc(ns), settings.Settings{Namespace: "tailscale", ProxyImage: "p:1"}, "")
	d, svc := objs[2].(*appsv1.Deployment), objs[3].(*corev1.Service)
	pod := d.Spec.Template.Spec
	if pod.Containers[0].Image != "tailscale/k8s-nameserver:stable" || *d.Spec.Replicas != 2 || pod.NodeSelector["pool"] != "dns" || pod.Tolerations[0].Key != "dns" {
		t.Errorf("image %s replicas %d nodeSelector %v tolerations %v", pod.Containers[0].Image, *d.Spec.Replicas, pod.NodeSelector, pod.Tolerations)
	}
	if svc.Spec.ClusterIP != "10.0.0.53" {
		t.Errorf("ClusterIP %q, want 10.0.0.53", svc.Spec.ClusterIP)
	}
}

func TestImage(t *testing.T) {
	for _, c := range []struct {
		img   *v1alpha1.NameserverImage
		proxy string
		want  string
	}{
		{nil, "ghcr.io/tailplane/tailplane-proxy:v1", "ghcr.io/tailplane/tailplane-proxy:v1"},
		{&v1alpha1.NameserverImage{Tag: "v2"}, "ghcr.io/tailplane/tailplane-proxy:v1", "ghcr.io/tailplane/tailplane-proxy:v2"},
		{&v1alpha1.NameserverImage{Tag: "v2"}, "localhost:5000/proxy@sha256:abc", "localhost:5000/proxy:v2"},
		{&v1alpha1.NameserverImage{Repo: "r/ns", Tag: "t"}, "p:1", "r/ns:t"},
	} {
		if got := dnsconfig.Image(dc(&v1alpha1.Nameserver{Image: c.img}), c.proxy); got != c.want {
			t.Errorf("Image(%v, %s) = %s, want %s", c.img, c.proxy, got, c.want)
		}
	}
}

func proxyPod(parentType, role, ns, name string, ready bool, ips ...string) corev1.Pod {
	p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Labels: proxyset.Parent{Type: parentType, Namespace: ns, Name: name}.OfficialLabels()}}
	p.Labels[proxyset.LabelProxyRole] = role
	st := corev1.ConditionFalse
	if ready {
		st = corev1.ConditionTrue
	}
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: st}}
	for _, ip := range ips {
		p.Status.PodIPs = append(p.Status.PodIPs, corev1.PodIP{IP: ip})
	}
	return p
}

func TestRecordsOfIngressAndFQDNEgressProxies(t *testing.T) {
	parents := dnsconfig.Parents{
		Services: map[types.NamespacedName]*corev1.Service{
			{Namespace: "app", Name: "db"}:  {ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{dnsconfig.AnnotationTailnetFQDN: "DB.tail1.ts.net."}}},
			{Namespace: "app", Name: "ip"}:  {ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{"tailscale.com/tailnet-ip": "100.64.0.9"}}},
			{Namespace: "app", Name: "web"}: {},
		},
		Ingresses: map[types.NamespacedName]*networkingv1.Ingress{
			{Namespace: "app", Name: "site"}: {Status: networkingv1.IngressStatus{LoadBalancer: networkingv1.IngressLoadBalancerStatus{
				Ingress: []networkingv1.IngressLoadBalancerIngress{{Hostname: "site.tail1.ts.net"}}}}},
			{Namespace: "app", Name: "new"}: {},
		},
	}
	pods := []corev1.Pod{
		proxyPod("svc", "egress", "app", "db", true, "10.1.0.5", "fd00::5"),
		proxyPod("svc", "egress", "app", "db", false, "10.1.0.6"), // not ready: no record
		proxyPod("svc", "egress", "app", "ip", true, "10.1.0.7"),  // tailnet-ip: no MagicDNS name
		proxyPod("svc", "ingress-l4", "app", "web", true, "10.1.0.8"),
		proxyPod("ingress", "ingress-l7", "app", "site", true, "10.1.0.9"),
		proxyPod("ingress", "ingress-l7", "app", "new", true, "10.1.0.10"), // no hostname yet
	}
	got := dnsconfig.Records(pods, parents)
	want := nameserver.Records{Version: "v1alpha1",
		IP4: map[string][]string{"db.tail1.ts.net": {"10.1.0.5"}, "site.tail1.ts.net": {"10.1.0.9"}},
		IP6: map[string][]string{"db.tail1.ts.net": {"fd00::5"}}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Records = %+v, want %+v", got, want)
	}
	data, err := got.Encode()
	if err != nil {
		t.Fatal(err)
	}
	table, skipped, err := nameserver.Parse([]byte(data))
	if err != nil || len(skipped) > 0 || table.IP4["db.tail1.ts.net."][0].String() != "10.1.0.5" {
		t.Fatalf("the nameserver reads %s as %v (skipped %v, err %v)", data, table, skipped, err)
	}
}

// An egress Service served by a ProxyGroup: its tailnet name resolves to the
// ClusterIP of the cluster Service the ProxyGroup module makes for it.
func TestRecordsOfProxyGroupEgressMembers(t *testing.T) {
	s := settings.Settings{Namespace: "tailscale", ProxyTags: []string{"tag:k8s"}}
	member := func(name string, ann map[string]string) *corev1.Service {
		ann[groupmember.AnnotationProxyGroup] = "eg"
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: name, Annotations: ann},
			Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, Ports: []corev1.ServicePort{{Port: 5432}}}}
		m, err := egress.GroupMember(svc, s)
		if err != nil {
			t.Fatal(err)
		}
		cs, err := groupmember.ClusterService(m, s.Namespace, nil, map[int32]bool{})
		if err != nil {
			t.Fatal(err)
		}
		return cs
	}
	db := member("db", map[string]string{dnsconfig.AnnotationTailnetFQDN: "db.tail1.ts.net"})
	db.Spec.ClusterIP, db.Spec.ClusterIPs = "10.96.0.20", []string{"10.96.0.20", "fd00:96::20"}
	byIP := member("byip", map[string]string{"tailscale.com/tailnet-ip": "100.64.0.9"})
	byIP.Spec.ClusterIP = "10.96.0.21"
	pending := member("pending", map[string]string{dnsconfig.AnnotationTailnetFQDN: "new.tail1.ts.net"}) // no ClusterIP yet
	got := dnsconfig.Records(nil, dnsconfig.Parents{GroupEgress: []corev1.Service{*db, *byIP, *pending}})
	want := nameserver.Records{Version: "v1alpha1",
		IP4: map[string][]string{"db.tail1.ts.net": {"10.96.0.20"}}, IP6: map[string][]string{"db.tail1.ts.net": {"fd00:96::20"}}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Records = %+v, want %+v", got, want)
	}
}
