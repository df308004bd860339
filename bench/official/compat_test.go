package official

import (
	"strings"
	"testing"
)

// Two snapshots that agree but for the order of their entries and their
// tailnet IPs compare equal; a real difference is marked in the table.
func TestCompare(t *testing.T) {
	off := Snapshot{
		Conditions: []string{"TailscaleProxyReady=True/ProxyCreated"},
		Status:     []string{"loadBalancer.ingress.hostname=default-postgres-lb.devcluster.ts.net", "loadBalancer.ingress.ip=" + Shape("100.64.0.7")},
		Children:   CountKinds([]string{"StatefulSet", "Secret", "Secret", "Service"}),
		SecretKeys: []string{SecretKeyList(map[string][]byte{"device_id": nil, "authkey": nil}), SecretKeyList(map[string]string{"cap-107.hujson": ""})},
		DeviceName: "default-postgres-lb.devcluster.ts.net", DeviceTags: []string{"tag:k8s"},
	}
	tp := Snapshot{
		Conditions: []string{"TailscaleProxyReady=True/ProxyCreated"},
		Status:     []string{"loadBalancer.ingress.ip=" + Shape("100.64.0.9"), "loadBalancer.ingress.hostname=default-postgres-lb.devcluster.ts.net"},
		Events:     []string{"Normal/ProxyReady"},
		Children:   CountKinds([]string{"Secret", "StatefulSet", "Service", "Secret"}),
		SecretKeys: []string{SecretKeyList(map[string]string{"cap-107.hujson": ""}), SecretKeyList(map[string][]byte{"authkey": nil, "device_id": nil})},
		DeviceName: "default-postgres-lb.devcluster.ts.net", DeviceTags: []string{"tag:k8s"},
	}
	rows := Compare("LoadBalancer Service", off, tp)
	differs := map[string]bool{}
	for _, r := range rows {
		if !r.Same() {
			differs[r.Property] = true
		}
	}
	if len(differs) != 1 || !differs["Events"] {
		t.Errorf("properties that differ: %v, want only Events", differs)
	}
	table := CompatTable(rows)
	for _, want := range []string{
		"| LoadBalancer Service | Events | `(none)` | `Normal/ProxyReady` | **differs** |",
		"| LoadBalancer Service | objects created | `Secret x2; Service x1; StatefulSet x1` | `Secret x2; Service x1; StatefulSet x1` | yes |",
		"| LoadBalancer Service | Secret keys | `authkey,device_id; cap-107.hujson` |",
		"| LoadBalancer Service | status fields | `loadBalancer.ingress.hostname=default-postgres-lb.devcluster.ts.net; loadBalancer.ingress.ip=<IPv4>` |",
	} {
		if !strings.Contains(table, want) {
			t.Errorf("table lacks %q:\n%s", want, table)
		}
	}
}

func TestShape(t *testing.T) {
	for in, want := range map[string]string{
		"100.64.0.1": "<IPv4>", "fd7a:115c:a1e0::1": "<IPv6>", "my-app.devcluster.ts.net": "my-app.devcluster.ts.net",
	} {
		if got := Shape(in); got != want {
			t.Errorf("Shape(%q) = %q, want %q", in, got, want)
		}
	}
}
