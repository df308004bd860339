package egress_test

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tailplane/tailplane/handlers/egress"
	"github.com/tailplane/tailplane/handlers/lib/pipeline"
	"github.com/tailplane/tailplane/handlers/lib/settings"
	"github.com/tailplane/tailplane/proxy/config"
)

var opts = settings.Settings{Namespace: "tailscale", ProxyImage: "proxy:1", ProxyTags: []string{"tag:k8s"}}

func svc(annotations map[string]string) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "apps", UID: "uid-9", Annotations: annotations},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, ClusterIP: "10.43.1.1", Selector: map[string]string{"app": "db"},
			Ports: []corev1.ServicePort{{Name: "pg", Port: 5432, Protocol: corev1.ProtocolTCP}, {Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP}}},
	}
}

func TestIsEgress(t *testing.T) {
	for _, tc := range []struct {
		a    map[string]string
		want bool
	}{
		{map[string]string{"tailscale.com/tailnet-fqdn": "db.tail1.ts.net"}, true},
		{map[string]string{"tailscale.com/tailnet-ip": "100.64.0.5"}, true},
		{map[string]string{"tailscale.com/ts-tailnet-target-ip": "100.64.0.5"}, true},
		{map[string]string{"tailscale.com/tailnet-ip": "100.64.0.5", "tailscale.com/proxy-group": "egress"}, false},
		{map[string]string{"tailscale.com/expose": "true"}, false},
	} {
		if got := egress.IsEgress(svc(tc.a)); got != tc.want {
			t.Errorf("%v: got %v", tc.a, got)
		}
	}
	if ip := egress.TailnetIP(svc(map[string]string{"tailscale.com/tailnet-ip": "100.64.0.6", "tailscale.com/ts-tailnet-target-ip": "100.64.0.5"})); ip != "100.64.0.6" {
		t.Errorf("the new annotation must win: %s", ip)
	}
}

func TestValidate(t *testing.T) {
	cases := map[string]map[string]string{
		"only one of annotations tailscale.com/tailnet-ip and tailscale.com/tailnet-fqdn can be set":                           {"tailscale.com/tailnet-ip": "100.64.0.5", "tailscale.com/tailnet-fqdn": "db.tail1.ts.net"},
		`invalid value of annotation tailscale.com/tailnet-fqdn: "db.example.com" does not appear to be a valid MagicDNS name`: {"tailscale.com/tailnet-fqdn": "db.example.com"},
		`invalid value of annotation tailscale.com/tailnet-ip: "100.64.0" could not be parsed as a valid IP Address`:           {"tailscale.com/tailnet-ip": "100.64.0"},
		`invalid tag "k8s"`: {"tailscale.com/tailnet-ip": "100.64.0.5", "tailscale.com/tags": "k8s"},
	}
	for want, a := range cases {
		problems := egress.Validate(svc(a), opts)
		if !slices.ContainsFunc(problems, func(p string) bool { return strings.Contains(p, want) }) {
			t.Errorf("want %q in %q", want, problems)
		}
		if plan := egress.Plan(svc(a), opts); !strings.Contains(plan.Invalid, want) {
			t.Errorf("%v planned: %q", a, plan.Invalid)
		}
	}
}

func TestRenderAndRewrite(t *testing.T) {
	s := svc(map[string]string{"tailscale.com/tailnet-fqdn": "db.tail1.ts.net"})
	objs, err := pipeline.Render(egress.Parent(s), opts, egress.Plan(s, opts), pipeline.Login{Keys: []string{"tskey-auth-1"}})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse(objs.Replicas[0].ConfigSecret.Data[config.SecretKey])
	if err != nil {
		t.Fatal(err)
	}
	want := []config.EgressTarget{{FQDN: "db.tail1.ts.net.", Ports: []config.PortMap{
		{Protocol: config.TCP, Port: 5432, TargetPort: 5432}, {Protocol: config.UDP, Port: 53, TargetPort: 53},
	}}}
	if cfg.Role != config.RoleEgress || cfg.Hostname != "apps-db" || !reflect.DeepEqual(cfg.Egress.Targets, want) {
		t.Fatalf("config %+v %+v", cfg, cfg.Egress)
	}
	if len(objs.Extra) != 1 {
		t.Fatalf("extra objects %v", objs.Extra)
	}
	h := objs.Extra[0].(*corev1.Service)
	if h.Namespace != "tailscale" || h.Spec.ClusterIP != "None" || !reflect.DeepEqual(h.Spec.Selector, objs.StatefulSet.Spec.Selector.MatchLabels) || len(h.Spec.Ports) != 2 {
		t.Fatalf("headless Service %+v", h)
	}
	name := egress.ExternalName(h, egress.ClusterDomain("nameserver 10.43.0.10\nsearch apps.svc.k3s.local svc.k3s.local k3s.local\n"))
	if name != h.Name+".tailscale.svc.k3s.local" {
		t.Fatalf("external name %q", name)
	}
	rw := egress.Rewrite(s, name)
	if rw.Spec.Type != corev1.ServiceTypeExternalName || rw.Spec.ExternalName != name || rw.Spec.Selector != nil || rw.Spec.ClusterIP != "" {
		t.Fatalf("rewritten %+v", rw.Spec)
	}
	if s.Spec.Type != corev1.ServiceTypeClusterIP {
		t.Fatal("Rewrite changed its input")
	}
	if d := egress.ClusterDomain(""); d != "cluster.local" {
		t.Fatalf("fallback %q", d)
	}
}
