package clusterdns

import (
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/log"
	"github.com/miekg/dns"
)

type fakeServices map[string][]netip.Addr

// Lookup: a key "ns/name" -> addresses; "ns/name=target" is an ExternalName.
func (f fakeServices) Lookup(ns, name string) ([]netip.Addr, string, bool) {
	for k := range f {
		if svc, target, ok := strings.Cut(k, "="); ok && svc == ns+"/"+name {
			return nil, target, true
		}
	}
	a, ok := f[ns+"/"+name]
	return a, "", ok
}

func query(t *testing.T, addr, name string, qtype uint16, network string) *dns.Msg {
	t.Helper()
	m := new(dns.Msg)
	m.SetQuestion(dns.Fqdn(name), qtype)
	c := &dns.Client{Net: network, Timeout: 2 * time.Second}
	res, _, err := c.Exchange(m, addr)
	if err != nil {
		t.Fatalf("%s %s over %s: %v", name, dns.TypeToString[qtype], network, err)
	}
	return res
}

func addrs(m *dns.Msg) []string {
	var out []string
	for _, rr := range m.Answer {
		switch r := rr.(type) {
		case *dns.A:
			out = append(out, r.A.String())
		case *dns.AAAA:
			out = append(out, r.AAAA.String())
		}
	}
	return out
}

// The cluster domain answers Services' ClusterIPs and NXDOMAIN for other
// names in it; the records file is authoritative and re-read when it
// changes; other names go to the upstream resolver (here another server
// with only a records file), over UDP and TCP.
func TestClusterDNS(t *testing.T) {
	dir := t.TempDir()
	upFile := filepath.Join(dir, "upstream")
	if err := os.WriteFile(upFile, []byte("203.0.113.9 far.example.org\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	up, err := Start(t.Context(), Config{Addr: "127.0.0.1:0", RecordsFile: upFile, Upstream: "-", Logger: log.New(io.Discard)})
	if err != nil {
		t.Fatal(err)
	}
	defer up.Close()
	records := filepath.Join(dir, "dns-records")
	s, err := Start(t.Context(), Config{Addr: "127.0.0.1:0", RecordsFile: records, Upstream: up.Addr, Logger: log.New(io.Discard),
		Services: fakeServices{"default/web": {netip.MustParseAddr("127.96.0.20")}, "tailscale/dual": {netip.MustParseAddr("127.96.0.21"), netip.MustParseAddr("fd00::21")},
			"default/alias=web.default.svc.cluster.local": nil, "default/far=far.example.org": nil, "default/headless": nil}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()

	for _, network := range []string{"udp", "tcp"} {
		res := query(t, s.Addr, "web.default.svc.cluster.local", dns.TypeA, network)
		if res.Rcode != dns.RcodeSuccess || !res.Authoritative || !slices.Equal(addrs(res), []string{"127.96.0.20"}) {
			t.Fatalf("web over %s: %v", network, res)
		}
	}
	if res := query(t, s.Addr, "DUAL.tailscale.svc.cluster.local", dns.TypeAAAA, "udp"); !slices.Equal(addrs(res), []string{"fd00::21"}) {
		t.Fatalf("dual AAAA: %v", res)
	}
	for _, name := range []string{"missing.default.svc.cluster.local", "web.default.cluster.local", "web.default.svc.cluster.local.default.svc.cluster.local"} {
		if res := query(t, s.Addr, name, dns.TypeA, "udp"); res.Rcode != dns.RcodeNameError {
			t.Fatalf("%s: rcode %s, want NXDOMAIN", name, dns.RcodeToString[res.Rcode])
		}
	}
	// ExternalName: a CNAME, followed here or through the upstream.
	if res := query(t, s.Addr, "alias.default.svc.cluster.local", dns.TypeA, "udp"); len(res.Answer) != 2 ||
		res.Answer[0].(*dns.CNAME).Target != "web.default.svc.cluster.local." || !slices.Equal(addrs(res), []string{"127.96.0.20"}) {
		t.Fatalf("ExternalName alias: %v", res)
	}
	if res := query(t, s.Addr, "far.default.svc.cluster.local", dns.TypeA, "tcp"); !slices.Equal(addrs(res), []string{"203.0.113.9"}) {
		t.Fatalf("ExternalName far: %v", res)
	}
	// A Service without addresses (headless, no ready endpoints) exists.
	if res := query(t, s.Addr, "headless.default.svc.cluster.local", dns.TypeA, "udp"); res.Rcode != dns.RcodeSuccess || len(res.Answer) != 0 {
		t.Fatalf("headless without endpoints: %v", res)
	}
	if res := query(t, s.Addr, "default.svc.cluster.local", dns.TypeA, "udp"); res.Rcode != dns.RcodeSuccess || len(res.Answer) != 0 {
		t.Fatalf("namespace name: %v", res)
	}

	// Not in the records file yet: forwarded, and the upstream (which
	// forwards nothing itself) fails it.
	if res := query(t, s.Addr, "app.e2e.test", dns.TypeA, "udp"); res.Rcode != dns.RcodeServerFailure {
		t.Fatalf("app.e2e.test before the record: %v", res)
	}
	if err := os.WriteFile(records, []byte("# test zone\n192.0.2.7 app.e2e.test www.app.e2e.test\n2001:db8::7 app.e2e.test\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if res := query(t, s.Addr, "App.E2E.test", dns.TypeA, "udp"); !res.Authoritative || !slices.Equal(addrs(res), []string{"192.0.2.7"}) {
		t.Fatalf("app.e2e.test A: %v", res)
	}
	if res := query(t, s.Addr, "app.e2e.test", dns.TypeAAAA, "tcp"); !slices.Equal(addrs(res), []string{"2001:db8::7"}) {
		t.Fatalf("app.e2e.test AAAA: %v", res)
	}
	if res := query(t, s.Addr, "www.app.e2e.test", dns.TypeAAAA, "udp"); res.Rcode != dns.RcodeSuccess || len(res.Answer) != 0 {
		t.Fatalf("www.app.e2e.test AAAA (no such address): %v", res)
	}
	if res := query(t, s.Addr, "far.example.org", dns.TypeA, "udp"); !slices.Equal(addrs(res), []string{"203.0.113.9"}) {
		t.Fatalf("far.example.org through the upstream: %v", res)
	}
	// A changed file is read again (same size: the mtime tells).
	if err := os.WriteFile(records, []byte("# test zone\n192.0.2.8 app.e2e.test www.app.e2e.test\n2001:db8::7 app.e2e.test\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	later := time.Now().Add(time.Second)
	if err := os.Chtimes(records, later, later); err != nil {
		t.Fatal(err)
	}
	if res := query(t, s.Addr, "app.e2e.test", dns.TypeA, "udp"); !slices.Equal(addrs(res), []string{"192.0.2.8"}) {
		t.Fatalf("app.e2e.test after the change: %v", res)
	}
}

// Without an upstream every other name is SERVFAIL, at once.
func TestNoUpstream(t *testing.T) {
	s, err := Start(t.Context(), Config{Addr: "127.0.0.1:0", Upstream: "-", Logger: log.New(io.Discard)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if res := query(t, s.Addr, "example.com", dns.TypeA, "udp"); res.Rcode != dns.RcodeServerFailure {
		t.Fatalf("rcode %s, want SERVFAIL", dns.RcodeToString[res.Rcode])
	}
}

func TestHostResolver(t *testing.T) {
	p := filepath.Join(t.TempDir(), "resolv.conf")
	_ = os.WriteFile(p, []byte("search x\n# c\nnameserver 10.255.255.53\nnameserver 1.1.1.1\n"), 0o644)
	if got := hostResolver(p); got != "10.255.255.53:53" {
		t.Fatalf("hostResolver = %q", got)
	}
}
