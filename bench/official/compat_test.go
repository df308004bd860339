package official

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
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

// Entries keep their index: one entry with a name and an IP (the official
// shape on ProxyGroup members) is told from one entry for each.
func TestLoadBalancerStatus(t *testing.T) {
	one := LoadBalancerStatus([]any{map[string]any{"hostname": "db.ts.net", "ip": "100.64.0.7", "ipMode": "VIP"}})
	two := LoadBalancerStatus([]any{map[string]any{"hostname": "db.ts.net"}, map[string]any{"ip": "100.64.0.7", "ipMode": "VIP"}})
	if want := "loadBalancer.ingress[0].hostname=db.ts.net; loadBalancer.ingress[0].ip=<IPv4>; loadBalancer.ingress[0].ipMode=VIP"; list(one) != want {
		t.Errorf("one entry: %s, want %s", list(one), want)
	}
	if list(one) == list(two) {
		t.Errorf("two entries print as one: %s", list(two))
	}
	ports := LoadBalancerStatus([]any{map[string]any{"hostname": "web.ts.net", "ports": []any{map[string]any{"port": int64(443), "protocol": "TCP"}}}})
	if !slices.Contains(ports, "loadBalancer.ingress[0].ports=443/TCP") {
		t.Errorf("ports: %v", ports)
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

// A snapshot counts once it stopped changing: the rows of session 11 were
// read at the first success, before the operators wrote their last
// conditions.
func TestSettleWaitsUntilTheSnapshotStopsChanging(t *testing.T) {
	calls := 0
	take := func() (Snapshot, error) {
		calls++
		s := Snapshot{Conditions: []string{"ProxyReady=False/ProxyCreating"}}
		if calls >= 4 {
			s.Conditions = []string{"ProxyReady=True/ProxyReady"}
		}
		return s, nil
	}
	got, took, err := settle(context.Background(), 10*time.Second, 5*time.Millisecond, 50*time.Millisecond, take, "test")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.Conditions, []string{"ProxyReady=True/ProxyReady"}) {
		t.Fatalf("settled on %v, want the last conditions", got.Conditions)
	}
	if calls < 5 || took < 50*time.Millisecond {
		t.Fatalf("settled after %d snapshots in %s; want it to wait out the quiet period after the 4th", calls, took)
	}

	// One that never settles ends with an error and the last snapshot.
	n := 0
	_, _, err = settle(context.Background(), 100*time.Millisecond, 5*time.Millisecond, time.Hour, func() (Snapshot, error) {
		n++
		return Snapshot{Events: []string{fmt.Sprint(n)}}, nil
	}, "a restless status")
	if err == nil || !strings.Contains(err.Error(), "a restless status") {
		t.Fatalf("never settling: error %v, want one naming what was awaited", err)
	}
}
