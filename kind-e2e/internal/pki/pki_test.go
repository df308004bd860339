package pki

import (
	"net"
	"os"
	"testing"
)

// A pair is issued once and kept across calls with the same names (a
// resumed cluster folder keeps its certificates), and issued again when
// the names change (a newer devcluster listening on another address).
func TestIssueKeepsOrRenewsByNames(t *testing.T) {
	dir := t.TempDir()
	ca, err := LoadOrCreateCA(dir, "test CA")
	if err != nil {
		t.Fatal(err)
	}
	issue := func(ips ...string) []byte {
		t.Helper()
		var parsed []net.IP
		for _, ip := range ips {
			parsed = append(parsed, net.ParseIP(ip))
		}
		p, err := ca.Issue(dir, "serving", "test", false, parsed, []string{"localhost"})
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(p.CertFile)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	first := issue("127.0.0.1", "198.19.0.1")
	if again := issue("198.19.0.1", "127.0.0.1"); string(again) != string(first) {
		t.Error("the same names in another order issued a new certificate")
	}
	if wider := issue("127.0.0.1", "198.19.0.1", "198.19.0.254"); string(wider) == string(first) {
		t.Error("a new address kept the old certificate")
	}
}
