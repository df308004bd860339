package proxyset_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/tailplane/tailplane/handlers/lib/proxyset"
	"github.com/tailplane/tailplane/proxy/config"
)

func TestBaseNameIsStableShortAndDistinct(t *testing.T) {
	a := baseName("svc", "default", "web")
	if a != baseName("svc", "default", "web") {
		t.Fatal("not stable")
	}
	if !strings.HasPrefix(a, "ts-web-") {
		t.Fatalf("%q does not start with ts-web-", a)
	}
	for _, other := range []string{baseName("svc", "prod", "web"), baseName("ingress", "default", "web")} {
		if other == a {
			t.Fatalf("same name %q for different parents", a)
		}
	}
	long := baseName("ingress", "default", strings.Repeat("a.b", 80))
	if len(long) > 52 {
		t.Fatalf("%q is %d characters, want at most 52", long, len(long))
	}
	if errs := validation.IsDNS1123Label(long); len(errs) > 0 {
		t.Fatalf("%q: %v", long, errs)
	}
}

func TestTruncateLabelValue(t *testing.T) {
	if v := proxyset.TruncateLabelValue("short"); v != "short" {
		t.Fatal(v)
	}
	a, b := proxyset.TruncateLabelValue(strings.Repeat("x", 70)+"1"), proxyset.TruncateLabelValue(strings.Repeat("x", 70)+"2")
	if len(a) > 63 || a == b || len(validation.IsValidLabelValue(a)) > 0 {
		t.Fatalf("%q / %q", a, b)
	}
}

func TestDeviceFromState(t *testing.T) {
	d, err := proxyset.DeviceFromState(&corev1.Secret{Data: map[string][]byte{
		"device_id": []byte("nSTABLE"), "device_fqdn": []byte("default-web.tail1.ts.net."), "device_ips": []byte(`["100.64.0.1","fd7a:115c:a1e0::1"]`),
	}})
	if err != nil {
		t.Fatal(err)
	}
	if d.ID != "nSTABLE" || d.FQDN != "default-web.tail1.ts.net" || len(d.IPs) != 2 {
		t.Fatalf("%+v", d)
	}
	if d, err := proxyset.DeviceFromState(nil); err != nil || d.FQDN != "" {
		t.Fatalf("nil Secret: %+v %v", d, err)
	}
	_, err = proxyset.DeviceFromState(&corev1.Secret{Data: map[string][]byte{"device_ips": []byte("100.64.0.1")}})
	if err == nil || !strings.Contains(err.Error(), "device_ips is not a JSON list") {
		t.Fatalf("bad device_ips: %v", err)
	}
}

func configSecret(key string) *corev1.Secret {
	b, _ := json.Marshal(config.Config{Version: config.Version, AuthKey: key})
	return &corev1.Secret{Data: map[string][]byte{config.SecretKey: b}}
}

func TestAuthKeyFor(t *testing.T) {
	loggedIn := &corev1.Secret{Data: map[string][]byte{"device_id": []byte("n1")}}
	cases := []struct {
		name          string
		config, state *corev1.Secret
		key           string
		mint          bool
	}{
		{"new proxy", nil, nil, "", true},
		{"key not used yet", configSecret("tskey-auth-1"), &corev1.Secret{}, "tskey-auth-1", false},
		{"logged in", configSecret("tskey-auth-1"), loggedIn, "", false},
		{"logged in, key already dropped", configSecret(""), loggedIn, "", false},
		{"config without key, not logged in", configSecret(""), nil, "", true},
	}
	for _, tc := range cases {
		key, mint := proxyset.AuthKeyFor(tc.config, tc.state)
		if key != tc.key || mint != tc.mint {
			t.Errorf("%s: got (%q, %v), want (%q, %v)", tc.name, key, mint, tc.key, tc.mint)
		}
	}
}

func TestProxyClassNameLabelBeforeAnnotation(t *testing.T) {
	const k = "tailscale.com/proxy-class"
	cases := []struct {
		labels, annotations map[string]string
		want                string
	}{
		{map[string]string{k: "from-label"}, map[string]string{k: "from-annotation"}, "from-label"},
		{nil, map[string]string{k: "from-annotation"}, "from-annotation"},
		{nil, nil, "default"},
	}
	for _, tc := range cases {
		if got := proxyset.ProxyClassName(tc.labels, tc.annotations, "default"); got != tc.want {
			t.Errorf("got %q, want %q", got, tc.want)
		}
	}
}

func TestTags(t *testing.T) {
	if tags, err := proxyset.Tags(nil, []string{"tag:k8s"}); err != nil || len(tags) != 1 || tags[0] != "tag:k8s" {
		t.Fatalf("default: %v %v", tags, err)
	}
	tags, err := proxyset.Tags(map[string]string{"tailscale.com/tags": "tag:web, tag:prod"}, []string{"tag:k8s"})
	if err != nil || strings.Join(tags, ",") != "tag:web,tag:prod" {
		t.Fatalf("annotation: %v %v", tags, err)
	}
	for value, want := range map[string]string{
		"web":          `invalid tag "web": tags must start with 'tag:'`,
		"tag:web,tag:": `invalid tag "tag:": tag names must not be empty`,
		"tag:we_b":     `invalid tag "tag:we_b": tag names can only contain numbers, letters, or dashes`,
		"":             "no tags given",
	} {
		_, err := proxyset.Tags(map[string]string{"tailscale.com/tags": value}, nil)
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "tailscale.com/tags") {
			t.Errorf("%q: got %v, want %q", value, err, want)
		}
	}
}

func TestRenderRefusesAnInvalidConfig(t *testing.T) {
	_, err := proxyset.Render(proxyset.Spec{
		Parent: proxyset.Parent{Type: "svc", Namespace: "default", Name: "web"}, Namespace: "tailscale", Image: "img",
		Configs: []*config.Config{{Version: config.Version, Hostname: "web", Role: config.RoleIngressL4, L4: &config.L4{}}},
	})
	if err == nil || !strings.Contains(err.Error(), "l4.ports: at least one port is required") {
		t.Fatalf("got %v", err)
	}
}

func TestKeyDescriptionFitsAndIsDistinct(t *testing.T) {
	short := baseName("svc", "default", "web")
	if d := proxyset.KeyDescription(short, -1); d != "tailplane "+short {
		t.Fatalf("short, single-replica release: %q", d)
	}
	if d := proxyset.KeyDescription(short, 3); d != "tailplane "+short+"-3" || !proxyset.IsReplicaKeyDescription(short, d) {
		t.Fatalf("short, replica 3: %q", d)
	}
	if proxyset.IsReplicaKeyDescription(short, "tailplane "+short) || proxyset.IsReplicaKeyDescription(baseName("svc", "default", "web2"), proxyset.KeyDescription(short, 0)) {
		t.Fatal("IsReplicaKeyDescription matches another proxy's or the legacy description")
	}
	a := proxyset.KeyDescription(baseName("svc", "default", strings.Repeat("a", 60)), 12)
	b := proxyset.KeyDescription(baseName("svc", "prod", strings.Repeat("a", 60)), 12)
	if len(a) > 50 || len(b) > 50 || a == b || !strings.HasPrefix(a, "tailplane ts-aaa") {
		t.Fatalf("long: %q (%d) / %q (%d)", a, len(a), b, len(b))
	}
	if hash := baseName("svc", "default", strings.Repeat("a", 60)); !strings.HasSuffix(a, hash[len(hash)-9:]+"-12") {
		t.Fatalf("%q does not end with the hash of %q", a, hash)
	}
}

func TestDeviceNamed(t *testing.T) {
	d := proxyset.Device{FQDN: "Web.tail1.ts.net"}
	if !d.Named("web") || d.Named("web2") || d.Named("tail1") || (proxyset.Device{}).Named("") || d.Named("we") {
		t.Fatal("Named")
	}
	// Another device held the name: control appended -N.
	taken := proxyset.Device{FQDN: "web-12.tail1.ts.net"}
	if !taken.Named("web") || !taken.Named("web-12") || taken.Named("web-1") || (proxyset.Device{FQDN: "web-.t.ts.net"}).Named("web") ||
		(proxyset.Device{FQDN: "web-x1.t.ts.net"}).Named("web") {
		t.Fatal("Named with control's suffix")
	}
}

func TestReplicaNames(t *testing.T) {
	n := proxyset.Parent{Type: "svc", Namespace: "default", Name: "web"}.Names()
	if n.Ordinal != 0 || n.StateSecret != n.Base+"-0" || n.ConfigSecret != n.Base+"-0-config" {
		t.Fatalf("replica 0: %+v", n)
	}
	r := n.Replica(2)
	if r.Base != n.Base || r.StateSecret != n.Base+"-2" || r.ConfigSecret != n.Base+"-2-config" {
		t.Fatalf("replica 2: %+v", r)
	}
	for name, want := range map[string]int{r.StateSecret: 2, r.ConfigSecret: 2, n.Base + "-10": 10} {
		if got, ok := proxyset.OrdinalOf(n.Base, name); !ok || got != want {
			t.Errorf("OrdinalOf(%q) = %d, %v", name, got, ok)
		}
	}
	for _, name := range []string{n.LegacyConfigSecret(), n.Base + "-tls", n.Base + "-01", n.Base + "-x-config", "other-0"} {
		if _, ok := proxyset.OrdinalOf(n.Base, name); ok {
			t.Errorf("OrdinalOf(%q) accepted", name)
		}
	}
}

// Every replica reads its own Secrets: the Pod names them from its own name,
// and the Role lets the proxies read no other.
func TestRenderReplicas(t *testing.T) {
	cfg := func(h string) *config.Config {
		return &config.Config{Version: config.Version, Hostname: h, Role: config.RoleIngressL4,
			L4: &config.L4{Ports: []config.PortMap{{Protocol: config.TCP, Port: 80, Target: "10.0.0.1:80"}}}}
	}
	objs, err := proxyset.Render(proxyset.Spec{
		Parent:    proxyset.Parent{Type: "connector", Name: "c", Role: "connector"},
		Namespace: "tailscale", Image: "img", Configs: []*config.Config{cfg("c-0"), cfg("c-1"), cfg("c-2")},
	})
	if err != nil {
		t.Fatal(err)
	}
	if *objs.StatefulSet.Spec.Replicas != 3 || len(objs.Replicas) != 3 {
		t.Fatalf("replicas: %d StatefulSet, %d rendered", *objs.StatefulSet.Spec.Replicas, len(objs.Replicas))
	}
	var names []string
	for i, r := range objs.Replicas {
		c, err := config.Parse(r.ConfigSecret.Data[config.SecretKey])
		if err != nil || c.Hostname != fmt.Sprintf("c-%d", i) || r.ConfigSecret.Name != objs.Names.Replica(i).ConfigSecret {
			t.Fatalf("replica %d: %s %v %v", i, r.ConfigSecret.Name, c, err)
		}
		if r.StateSecret.Labels[proxyset.LabelProxyRole] != "connector" {
			t.Fatalf("replica %d state Secret labels %v", i, r.StateSecret.Labels)
		}
		names = append(names, r.ConfigSecret.Name, r.StateSecret.Name)
	}
	if got := objs.Role.Rules[0].ResourceNames; !slices.Equal(got, names) {
		t.Fatalf("Role names %v, want %v", got, names)
	}
	env := map[string]string{}
	for _, e := range objs.StatefulSet.Spec.Template.Spec.Containers[0].Env {
		env[e.Name] = e.Value
	}
	if env[proxyset.EnvConfigSecret] != "$(POD_NAME)-config" || env[proxyset.EnvStateSecret] != "$(POD_NAME)" {
		t.Fatalf("env %v", env)
	}
}

// A proxy scaled to zero keeps its identity objects, and its Role grants
// nothing: a Secrets rule without resourceNames would grant every Secret.
func TestRenderZeroReplicasGrantsNothing(t *testing.T) {
	objs, err := proxyset.Render(proxyset.Spec{Parent: proxyset.Parent{Type: "connector", Name: "c", Role: "connector"},
		Namespace: "tailscale", Image: "img"})
	if err != nil {
		t.Fatal(err)
	}
	if *objs.StatefulSet.Spec.Replicas != 0 || len(objs.Replicas) != 0 || len(objs.Role.Rules) != 0 {
		t.Fatalf("replicas %d, rendered %d, rules %+v", *objs.StatefulSet.Spec.Replicas, len(objs.Replicas), objs.Role.Rules)
	}
}

// baseName is the base name of the proxy of parent namespace/name of
// parentType.
func baseName(parentType, namespace, name string) string {
	return proxyset.Parent{Type: parentType, Namespace: namespace, Name: name}.Names().Base
}
