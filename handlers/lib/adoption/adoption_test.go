package adoption_test

import (
	"maps"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/tailplane/tailplane/handlers/lib/adoption"
	"github.com/tailplane/tailplane/handlers/lib/proxyset"
)

func secret(name string, l map[string]string, data map[string]string) corev1.Secret {
	s := corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: l}, Data: map[string][]byte{}}
	for k, v := range data {
		s.Data[k] = []byte(v)
	}
	return s
}

func officialLabels(name, ns, typ string, extra ...string) map[string]string {
	l := map[string]string{"tailscale.com/managed": "true", "tailscale.com/parent-resource": name,
		"tailscale.com/parent-resource-ns": ns, "tailscale.com/parent-resource-type": typ}
	for i := 0; i+1 < len(extra); i += 2 {
		l[extra[i]] = extra[i+1]
	}
	return l
}

var identity = map[string]string{"_machinekey": "privkey:1", "_current-profile": "profile-ab12", "profile-ab12": "{}",
	"_profiles": "{}", "device_id": "nID1", "device_fqdn": "web.tailnet.ts.net.", "device_ips": `["100.64.0.7"]`}

func TestSelectorMatchesOfficialObjectsOnly(t *testing.T) {
	p := proxyset.Parent{Type: "svc", Namespace: "default", Name: "web", Role: "service"}
	sel := adoption.Selector(p)
	official := officialLabels("web", "default", "svc")
	if !sel.Matches(labels.Set(official)) {
		t.Errorf("%s does not match the official operator's labels %v", sel, official)
	}
	ours := maps.Clone(official)
	ours[proxyset.LabelProxyRole] = "service"
	if sel.Matches(labels.Set(ours)) {
		t.Errorf("%s matches Tailplane's own objects", sel)
	}
	if sel.Matches(labels.Set(officialLabels("web", "default", "ingress"))) {
		t.Errorf("%s matches another parent type", sel)
	}
	if adoption.Belongs(officialLabels("web", "other", "svc"), p) {
		t.Error("an object of a parent in another namespace belongs to p")
	}
	cluster := proxyset.Parent{Type: "connector", Name: "router"}
	if !adoption.Belongs(officialLabels("router", "", "connector"), cluster) || !adoption.Belongs(map[string]string{}, cluster) {
		t.Error("a cluster-scoped parent's objects (namespace label empty or absent) do not belong to it")
	}
}

func TestFindReplicas(t *testing.T) {
	p := proxyset.Parent{Type: "proxygroup", Name: "ingress"}
	pg := func(typ string) map[string]string {
		return map[string]string{"tailscale.com/managed": "true", "tailscale.com/parent-resource": "ingress",
			"tailscale.com/parent-resource-type": "proxygroup", "tailscale.com/secret-type": typ}
	}
	got := adoption.Find(p, []corev1.Secret{
		secret("ingress-1", pg("state"), identity),
		secret("ingress-0", pg("state"), nil),
		secret("ingress-0-config", pg("config"), map[string]string{"cap-107.hujson": "{}"}),
		secret("web.tailnet.ts.net", pg("certs"), nil),
		secret("ingress-x", pg("state"), nil),
	})
	if len(got) != 2 || got[0].Ordinal != 0 || got[1].Ordinal != 1 {
		t.Fatalf("replicas %+v, want ordinals 0 and 1 (state Secrets only)", got)
	}
	if got[0].HasIdentity() || !got[1].HasIdentity() {
		t.Errorf("identity: replica 0 %v (never logged in), replica 1 %v (logged in)", got[0].HasIdentity(), got[1].HasIdentity())
	}
	if d := got[1].Device; d.ID != "nID1" || d.FQDN != "web.tailnet.ts.net" || !slices.Equal(d.IPs, []string{"100.64.0.7"}) {
		t.Errorf("device %+v", d)
	}
	single := proxyset.Parent{Type: "svc", Namespace: "default", Name: "web"}
	one := adoption.Find(single, []corev1.Secret{
		secret("ts-web-x7k2p-0", officialLabels("web", "default", "svc"), identity),
		secret("ts-web-aaaaa-0", officialLabels("web", "default", "svc"), nil),
	})
	if len(one) != 1 || one[0].State.Name != "ts-web-x7k2p-0" {
		t.Errorf("two Secrets of one ordinal: kept %+v, want the one with a device", one)
	}
}

func TestCarriedKeepsIdentityAndCertificatesOnly(t *testing.T) {
	data := map[string][]byte{}
	for k, v := range identity {
		data[k] = []byte(v)
	}
	for _, k := range []string{"cap-107.hujson", "serve-config", "_serve_profile-ab12", "pod_uid", "tailscale_capver",
		"https_endpoint", "web.tailnet.ts.net.crt", "web.tailnet.ts.net.key", "acme-account.key.pem"} {
		data[k] = []byte("x")
	}
	got := slices.Sorted(maps.Keys(adoption.Carried(data)))
	want := []string{"_current-profile", "_machinekey", "_profiles", "acme-account.key.pem", "device_fqdn", "device_id", "device_ips",
		"profile-ab12", "web.tailnet.ts.net.crt", "web.tailnet.ts.net.key"}
	if !slices.Equal(got, want) {
		t.Errorf("carried %v\nwant    %v", got, want)
	}
}

func TestDryRunMessage(t *testing.T) {
	p := proxyset.Parent{Type: "svc", Namespace: "default", Name: "web"}
	r := adoption.Find(p, []corev1.Secret{secret("ts-web-x7k2p-0", officialLabels("web", "default", "svc"), identity)})
	msg := adoption.DryRun(r, []string{"StatefulSet ts-web-x7k2p", "Service ts-web-x7k2p"})
	for _, want := range []string{"OPERATOR_ADOPT_OFFICIAL=dry-run", "web.tailnet.ts.net (node nID1, 100.64.0.7)", "delete StatefulSet ts-web-x7k2p, Service ts-web-x7k2p"} {
		if !strings.Contains(msg, want) {
			t.Errorf("message %q lacks %q", msg, want)
		}
	}
}
