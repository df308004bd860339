package service_test

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tailplane/tailplane/handlers/lib/pipeline"
	"github.com/tailplane/tailplane/handlers/lib/proxyset"
	"github.com/tailplane/tailplane/handlers/lib/settings"
	"github.com/tailplane/tailplane/handlers/service"
	"github.com/tailplane/tailplane/proxy/config"
)

var opts = settings.Settings{Namespace: "tailscale", ProxyImage: "ghcr.io/tailplane/tailplane-proxy:test", ProxyTags: []string{"tag:k8s"}}

func svc(mutate ...func(*corev1.Service)) *corev1.Service {
	s := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "postgres", Namespace: "default", UID: "uid-1"},
		Spec: corev1.ServiceSpec{
			Type: corev1.ServiceTypeClusterIP, ClusterIP: "10.43.0.10",
			Ports: []corev1.ServicePort{{Port: 5432, Protocol: corev1.ProtocolTCP}},
		},
	}
	for _, m := range mutate {
		m(s)
	}
	return s
}

func annotate(k, v string) func(*corev1.Service) {
	return func(s *corev1.Service) {
		if s.Annotations == nil {
			s.Annotations = map[string]string{}
		}
		s.Annotations[k] = v
	}
}

func loadBalancer(class *string) func(*corev1.Service) {
	return func(s *corev1.Service) {
		s.Spec.Type = corev1.ServiceTypeLoadBalancer
		s.Spec.LoadBalancerClass = class
	}
}

func TestClassify(t *testing.T) {
	ts, traefik := "tailscale", "io.k3s.cattle/servicelb"
	cases := []struct {
		name      string
		svc       *corev1.Service
		defaultLB bool
		want      service.Kind
	}{
		{"expose annotation", svc(annotate("tailscale.com/expose", "true")), false, service.Expose},
		{"expose must be exactly true", svc(annotate("tailscale.com/expose", "True")), false, service.NotOurs},
		{"plain ClusterIP", svc(), true, service.NotOurs},
		{"LoadBalancer class tailscale", svc(loadBalancer(&ts)), false, service.LoadBalancer},
		{"LoadBalancer without class is ServiceLB's", svc(loadBalancer(nil)), false, service.NotOurs},
		{"LoadBalancer without class, default LB on", svc(loadBalancer(nil)), true, service.LoadBalancer},
		{"LoadBalancer of another class, default LB on", svc(loadBalancer(&traefik)), true, service.NotOurs},
		{"another class with expose is exposed, status untouched", svc(loadBalancer(&traefik), annotate("tailscale.com/expose", "true")), false, service.Expose},
		{"tailscale LB plus expose", svc(loadBalancer(&ts), annotate("tailscale.com/expose", "true")), false, service.LoadBalancer},
		{"ProxyGroup Services are not ours", svc(loadBalancer(&ts), annotate("tailscale.com/proxy-group", "pg")), false, service.NotOurs},
		{"egress Services go to the egress handler", svc(annotate("tailscale.com/expose", "true"), annotate("tailscale.com/tailnet-fqdn", "db.tail1.ts.net")), false, service.NotOurs},
		{"class on a non-LoadBalancer", svc(func(s *corev1.Service) { s.Spec.LoadBalancerClass = &ts }), false, service.NotOurs},
	}
	for _, tc := range cases {
		if got := service.Classify(tc.svc, service.Claim{Default: tc.defaultLB}); got != tc.want {
			t.Errorf("%s: got %v, want %v", tc.name, got, tc.want)
		}
	}
}

// OPERATOR_LOAD_BALANCER_CLASS moves the operator to another class, so that
// it runs beside the official operator (which keeps tailscale): the
// official class is then not ours.
func TestClassifyWithAnotherClass(t *testing.T) {
	ts, tp := "tailscale", "tailplane"
	claim := service.ClaimOf(settings.Settings{LoadBalancerClass: tp})
	if got := service.Classify(svc(loadBalancer(&tp)), claim); got != service.LoadBalancer {
		t.Errorf("class tailplane: got %v, want LoadBalancer", got)
	}
	if got := service.Classify(svc(loadBalancer(&ts)), claim); got != service.NotOurs {
		t.Errorf("class tailscale while serving tailplane: got %v, want NotOurs", got)
	}
	if got := service.Classify(svc(loadBalancer(&tp)), service.Claim{}); got != service.NotOurs {
		t.Errorf("class tailplane with the default claim: got %v, want NotOurs", got)
	}
}

func TestHostname(t *testing.T) {
	if h, err := service.Hostname(svc()); err != nil || h != "default-postgres" {
		t.Fatalf("default: %q %v", h, err)
	}
	if h, err := service.Hostname(svc(annotate("tailscale.com/hostname", "db"))); err != nil || h != "db" {
		t.Fatalf("override: %q %v", h, err)
	}
	for value, want := range map[string]string{
		"my_db":                 `invalid Tailscale hostname specified "my_db" in annotation tailscale.com/hostname: "my_db" is not a valid DNS label (a hostname is one DNS label: 1 to 63 letters, digits or hyphens, starting and ending with a letter or digit): it contains '_'`,
		"Bad_Name!":             `invalid Tailscale hostname specified "Bad_Name!" in annotation tailscale.com/hostname: "Bad_Name!" is not a valid DNS label (a hostname is one DNS label: 1 to 63 letters, digits or hyphens, starting and ending with a letter or digit): it contains '_', '!'`,
		"-db-":                  `it starts with '-'; it ends with '-'`,
		strings.Repeat("d", 64): `it is 64 characters long`,
		"":                      `it is empty`,
	} {
		_, err := service.Hostname(svc(annotate("tailscale.com/hostname", value)))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: got %v, want %q", value, err, want)
		}
	}
	long := svc(func(s *corev1.Service) { s.Name = strings.Repeat("p", 60) })
	if _, err := service.Hostname(long); err == nil || !strings.Contains(err.Error(), `use "tailscale.com/hostname" annotation to override`) {
		t.Fatalf("long default: %v", err)
	}
}

func TestValidateRefusesBadServices(t *testing.T) {
	cases := map[string]*corev1.Service{
		"headless Services are not supported.":       svc(func(s *corev1.Service) { s.Spec.ClusterIP = "None" }),
		`invalid tag "k8s"`:                          svc(annotate("tailscale.com/tags", "k8s")),
		`invalid Tailscale hostname specified "a.b"`: svc(annotate("tailscale.com/hostname", "a.b")),
		"the Service has no ports.":                  svc(func(s *corev1.Service) { s.Spec.Ports = nil }),
		"the ExternalName Service has no spec.externalName.": svc(func(s *corev1.Service) {
			s.Spec.Type, s.Spec.ClusterIP = corev1.ServiceTypeExternalName, ""
		}),
	}
	for want, s := range cases {
		problems := service.Validate(s, opts)
		if !slices.ContainsFunc(problems, func(p string) bool { return strings.Contains(p, want) }) {
			t.Errorf("want %q in %q", want, problems)
		}
		if plan := service.Plan(s, opts); !strings.Contains(plan.Invalid, want) {
			t.Errorf("Plan of an invalid Service: %q", plan.Invalid)
		}
		if _, err := service.Config(s, opts); err == nil || !strings.HasPrefix(err.Error(), "invalid Service: ") {
			t.Errorf("Config of an invalid Service: %v", err)
		}
	}
	if p := service.Validate(svc(), opts); len(p) != 0 {
		t.Fatalf("valid Service refused: %q", p)
	}
}

func TestExternalNameForwardsToTheName(t *testing.T) {
	s := svc(annotate("tailscale.com/expose", "true"), func(s *corev1.Service) {
		s.Spec.Type, s.Spec.ClusterIP, s.Spec.ExternalName = corev1.ServiceTypeExternalName, "", "db.example.com."
		s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Port: 53, Protocol: corev1.ProtocolUDP})
	})
	cfg, err := service.Config(s, opts)
	if err != nil {
		t.Fatal(err)
	}
	want := []config.PortMap{
		{Protocol: config.TCP, Port: 5432, Target: "db.example.com:5432"},
		{Protocol: config.UDP, Port: 53, Target: "db.example.com:53"},
	}
	if !reflect.DeepEqual(cfg.L4.Ports, want) {
		t.Fatalf("ports: got %+v, want %+v", cfg.L4.Ports, want)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("the proxy would refuse the config: %v", err)
	}
}

func TestRenderObjects(t *testing.T) {
	s := svc(annotate("tailscale.com/expose", "true"), annotate("tailscale.com/tags", "tag:db"), func(s *corev1.Service) {
		s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Port: 53, Protocol: corev1.ProtocolUDP})
	})
	objs, err := pipeline.Render(service.Parent(s), opts, service.Plan(s, opts),
		pipeline.Login{Server: "https://hs.example.com", Keys: []string{"tskey-auth-1"}})
	if err != nil {
		t.Fatal(err)
	}
	names := service.Parent(s).Names()
	wantLabels := map[string]string{
		"tailscale.com/managed": "true", "tailscale.com/parent-resource": "postgres",
		"tailscale.com/parent-resource-ns": "default", "tailscale.com/parent-resource-type": "svc",
	}
	for _, o := range objs.List() {
		m := o.(metav1.ObjectMetaAccessor).GetObjectMeta()
		if m.GetNamespace() != "tailscale" {
			t.Errorf("%s is in namespace %q", m.GetName(), m.GetNamespace())
		}
		for k, v := range wantLabels {
			if m.GetLabels()[k] != v {
				t.Errorf("%s: label %s = %q, want %q", m.GetName(), k, m.GetLabels()[k], v)
			}
		}
	}

	// The Role reaches only the proxy's own two Secrets.
	rules := objs.Role.Rules
	if len(rules) != 1 || !reflect.DeepEqual(rules[0].Resources, []string{"secrets"}) ||
		!reflect.DeepEqual(rules[0].ResourceNames, []string{names.ConfigSecret, names.StateSecret}) {
		t.Fatalf("role rules %+v", rules)
	}
	if sub := objs.RoleBinding.Subjects; len(sub) != 1 || sub[0].Name != names.Base || sub[0].Namespace != "tailscale" || objs.RoleBinding.RoleRef.Name != names.Base {
		t.Fatalf("role binding %+v", objs.RoleBinding)
	}
	if objs.Replicas[0].StateSecret.Data != nil || objs.Replicas[0].StateSecret.Labels["tailscale.com/secret-type"] != "state" {
		t.Fatalf("state Secret %+v", objs.Replicas[0].StateSecret)
	}

	checkStatefulSet(t, objs.StatefulSet, names)

	// The config Secret holds an ingress-l4 config the proxy accepts.
	cfg, err := config.Parse(objs.Replicas[0].ConfigSecret.Data[config.SecretKey])
	if err != nil {
		t.Fatal(err)
	}
	want := &config.Config{
		Version: config.Version, Hostname: "default-postgres", Tags: []string{"tag:db"}, LoginServer: "https://hs.example.com",
		AuthKey: "tskey-auth-1", Role: config.RoleIngressL4,
		L4: &config.L4{Ports: []config.PortMap{
			{Protocol: config.TCP, Port: 5432, Target: "10.43.0.10:5432"},
			{Protocol: config.UDP, Port: 53, Target: "10.43.0.10:53"},
		}},
	}
	if !reflect.DeepEqual(cfg, want) {
		t.Fatalf("config\n got %+v\nwant %+v", cfg, want)
	}
}

func checkStatefulSet(t *testing.T, sts *appsv1.StatefulSet, names proxyset.Names) {
	t.Helper()
	if sts.Name != names.Base || *sts.Spec.Replicas != 1 {
		t.Fatalf("StatefulSet %s replicas %d", sts.Name, *sts.Spec.Replicas)
	}
	pod := sts.Spec.Template
	if pod.Spec.ServiceAccountName != names.Base {
		t.Errorf("service account %q", pod.Spec.ServiceAccountName)
	}
	if !reflect.DeepEqual(sts.Spec.Selector.MatchLabels, map[string]string{"app": "uid-1"}) || pod.Labels["app"] != "uid-1" {
		t.Errorf("selector %v, pod labels %v", sts.Spec.Selector.MatchLabels, pod.Labels)
	}
	c := pod.Spec.Containers[0]
	if c.Image != opts.ProxyImage {
		t.Errorf("image %q", c.Image)
	}
	env := map[string]corev1.EnvVar{}
	for _, e := range c.Env {
		env[e.Name] = e
	}
	if e := env["POD_IP"]; e.ValueFrom == nil || e.ValueFrom.FieldRef.FieldPath != "status.podIP" {
		t.Errorf("POD_IP %+v", e)
	}
	// The kubelet expands $(POD_NAME): the only Pod is replica 0.
	inPod := func(v string) string { return strings.ReplaceAll(v, "$(POD_NAME)", names.Base+"-0") }
	if inPod(env[proxyset.EnvConfigSecret].Value) != names.ConfigSecret || inPod(env[proxyset.EnvStateSecret].Value) != names.StateSecret {
		t.Errorf("secret env %+v", c.Env)
	}
	if c.SecurityContext == nil || c.SecurityContext.Privileged != nil || len(pod.Spec.InitContainers) != 0 {
		t.Errorf("the proxy must run unprivileged without init containers")
	}
	if ro := c.SecurityContext.ReadOnlyRootFilesystem; ro == nil || !*ro {
		t.Errorf("the proxy's root filesystem must be read-only")
	}
	if len(c.VolumeMounts) != 1 || c.VolumeMounts[0].MountPath != "/tmp/tailplane-proxy" || len(pod.Spec.Volumes) != 1 ||
		pod.Spec.Volumes[0].Name != c.VolumeMounts[0].Name || pod.Spec.Volumes[0].EmptyDir == nil {
		t.Errorf("the proxy needs an emptyDir for its scratch files: mounts %+v, volumes %+v", c.VolumeMounts, pod.Spec.Volumes)
	}
}

func TestLoadBalancerIngress(t *testing.T) {
	dev := proxyset.Device{FQDN: "default-postgres.tail1.ts.net", IPs: []string{"100.64.0.7", "fd7a:115c:a1e0::7", "junk"}}
	got, err := service.LoadBalancerIngress(svc(), dev)
	if err != nil {
		t.Fatal(err)
	}
	want := []corev1.LoadBalancerIngress{{Hostname: "default-postgres.tail1.ts.net"}, {IP: "100.64.0.7"}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("IPv4 cluster: got %+v", got)
	}
	v6 := svc(func(s *corev1.Service) { s.Spec.ClusterIP = "fd00::10" })
	got, _ = service.LoadBalancerIngress(v6, dev)
	want = []corev1.LoadBalancerIngress{{Hostname: "default-postgres.tail1.ts.net"}, {IP: "fd7a:115c:a1e0::7"}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("IPv6 cluster: got %+v", got)
	}
	if got, err := service.LoadBalancerIngress(svc(), proxyset.Device{IPs: []string{"100.64.0.7"}}); got != nil || err != nil {
		t.Fatalf("no FQDN yet: %+v %v", got, err)
	}
}
