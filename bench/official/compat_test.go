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

// A ProxyGroup's devices are compared field by field, by index, with their
// addresses by family; the conditions and the load balancer status are
// left to their own rows.
func TestOtherStatus(t *testing.T) {
	status := map[string]any{
		"conditions":   []any{map[string]any{"type": "ProxyGroupReady"}},
		"loadBalancer": map[string]any{"ingress": []any{}},
		"devices": []any{
			map[string]any{"hostname": "ingress-proxies-0", "tailnetIPs": []any{"100.64.0.3", "fd7a:115c:a1e0::3"}},
			map[string]any{"hostname": "ingress-proxies-1"},
		},
	}
	got := OtherStatus(status)
	want := []string{"devices[0].hostname=ingress-proxies-0", "devices[0].tailnetIPs[0]=<IPv4>", "devices[0].tailnetIPs[1]=<IPv6>", "devices[1].hostname=ingress-proxies-1"}
	if !slices.Equal(got, want) {
		t.Errorf("OtherStatus = %q, want %q", got, want)
	}
}

// A Tailscale Service summary hides what differs on every run (addresses,
// annotation values, the comment's words) and keeps what a user relies on;
// the row appears only for snapshots that have one.
func TestTailscaleServiceRow(t *testing.T) {
	a := SummarizeService(tailscaleService{Ports: []string{"tcp:443", "tcp:80"}, Tags: []string{"tag:k8s"}, Comment: "managed by A",
		Annotations: map[string]string{"tailscale.com/owner-references": `{"ownerRefs":[{"operatorID":"n1"}]}`}, Addrs: []string{"100.100.1.1", "fd7a::1"}})
	b := SummarizeService(tailscaleService{Ports: []string{"tcp:80", "tcp:443"}, Tags: []string{"tag:k8s"}, Comment: "managed by B",
		Annotations: map[string]string{"tailscale.com/owner-references": `{"ownerRefs":[{"operatorID":"n2"}]}`}, Addrs: []string{"100.100.1.2", "fd7a::2"}})
	if a != b || !strings.Contains(a, "ports=tcp:443,tcp:80 tags=tag:k8s comment=true annotations=tailscale.com/owner-references addrs=<IPv4>,<IPv6>") {
		t.Errorf("summaries %q and %q, want equal and complete", a, b)
	}
	rows := Compare("member", Snapshot{TailscaleService: a}, Snapshot{TailscaleService: "(absent)"})
	if last := rows[len(rows)-1]; last.Property != "Tailscale Service" || last.Same() {
		t.Errorf("last row %+v, want a differing Tailscale Service row", last)
	}
	for _, r := range Compare("dedicated", Snapshot{}, Snapshot{}) {
		if r.Property == "Tailscale Service" {
			t.Error("a parent without a Tailscale Service got the row")
		}
	}
	if got := parentSelector("", "ingress-proxies"); got != "tailscale.com/parent-resource=ingress-proxies" {
		t.Errorf("selector of a cluster-scoped parent: %q", got)
	}
}
