package nameserver_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/tailplane/tailplane/internal/nameserver"
	"github.com/tailplane/tailplane/internal/testenv"
	"github.com/tailplane/tailplane/internal/testpoll"
)

// start serves the records file path on loopback UDP and TCP and returns
// the address.
func start(t *testing.T, path string) string {
	t.Helper()
	pc, ln := testenv.ListenUDPAndTCP(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	s := &nameserver.Server{Path: path, Reload: 50 * time.Millisecond}
	go func() { done <- s.Serve(ctx, pc, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return pc.LocalAddr().String()
}

func query(t *testing.T, network, addr, name string, qtype uint16) (*dns.Msg, error) {
	t.Helper()
	m := new(dns.Msg)
	m.SetQuestion(dns.Fqdn(name), qtype)
	c := &dns.Client{Net: network, Timeout: 2 * time.Second}
	r, _, err := c.Exchange(m, addr)
	return r, err
}

func write(t *testing.T, path, content string) {
	t.Helper()
	// Replace atomically, as kubelet swaps a ConfigMap mount.
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

func TestNameserverAnswersTailnetNamesOverUDPAndTCP(t *testing.T) {
	path := filepath.Join(t.TempDir(), nameserver.RecordsKey)
	write(t, path, `{"version":"v1alpha1","ip4":{"web.tail1.ts.net":["10.1.2.3","10.1.2.4"],"db.tail1.ts.net.":["10.9.9.9"]},"ip6":{"web.tail1.ts.net":["fd00::3"]}}`)
	addr := start(t, path)
	for _, network := range []string{"udp", "tcp"} {
		r, err := query(t, network, addr, "Web.Tail1.ts.net", dns.TypeA)
		if err != nil {
			t.Fatalf("%s A: %v", network, err)
		}
		if r.Rcode != dns.RcodeSuccess || !r.Authoritative || len(r.Answer) != 2 {
			t.Fatalf("%s A web: rcode %s, aa %v, answers %v; want NOERROR, authoritative, 2 answers", network, dns.RcodeToString[r.Rcode], r.Authoritative, r.Answer)
		}
		if got := r.Answer[0].(*dns.A).A.String(); got != "10.1.2.3" {
			t.Errorf("%s A web: first answer %s, want 10.1.2.3", network, got)
		}
		r, err = query(t, network, addr, "web.tail1.ts.net", dns.TypeAAAA)
		if err != nil || r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 || r.Answer[0].(*dns.AAAA).AAAA.String() != "fd00::3" {
			t.Errorf("%s AAAA web: %v %v, want fd00::3", network, r, err)
		}
		// A name with only IPv4: NOERROR and no answer (RFC 4074).
		r, err = query(t, network, addr, "db.tail1.ts.net", dns.TypeAAAA)
		if err != nil || r.Rcode != dns.RcodeSuccess || len(r.Answer) != 0 {
			t.Errorf("%s AAAA db: %v %v, want NOERROR without answers", network, r, err)
		}
		r, err = query(t, network, addr, "nope.tail1.ts.net", dns.TypeA)
		if err != nil || r.Rcode != dns.RcodeNameError || !r.Authoritative {
			t.Errorf("%s A nope: %v %v, want authoritative NXDOMAIN", network, r, err)
		}
		r, err = query(t, network, addr, "example.com", dns.TypeA)
		if err != nil || r.Rcode != dns.RcodeRefused {
			t.Errorf("%s A example.com: %v %v, want REFUSED", network, r, err)
		}
		r, err = query(t, network, addr, "web.tail1.ts.net", dns.TypeMX)
		if err != nil || r.Rcode != dns.RcodeNotImplemented {
			t.Errorf("%s MX web: %v %v, want NOTIMP", network, r, err)
		}
	}
}

func TestNameserverFollowsTheRecordsFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), nameserver.RecordsKey)
	addr := start(t, path) // no file yet: no records
	answer := func(name string) func() error {
		return func() error {
			r, err := query(t, "udp", addr, name, dns.TypeA)
			if err != nil {
				return err
			}
			if r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 {
				return &rcodeError{r}
			}
			return nil
		}
	}
	if r, err := query(t, "udp", addr, "web.tail1.ts.net", dns.TypeA); err != nil || r.Rcode != dns.RcodeNameError {
		t.Fatalf("before any records: %v %v, want NXDOMAIN", r, err)
	}
	write(t, path, `{"version":"v1alpha1","ip4":{"web.tail1.ts.net":["10.1.2.3"]}}`)
	testpoll.Until(t, 10*time.Second, "the new record answered", answer("web.tail1.ts.net"))

	// A broken file keeps the last good records.
	write(t, path, `{"version":"v1alpha1","ip4":`)
	testpoll.Always(t, 300*time.Millisecond, "the record kept through a broken file", answer("web.tail1.ts.net"))

	// A bad record is skipped, the others kept.
	write(t, path, `{"version":"v1alpha1","ip4":{"web.tail1.ts.net":["not-an-ip"],"db.tail1.ts.net":["10.9.9.9","fd00::1"]}}`)
	testpoll.Until(t, 10*time.Second, "db answered", answer("db.tail1.ts.net"))
	if r, err := query(t, "udp", addr, "web.tail1.ts.net", dns.TypeA); err != nil || r.Rcode != dns.RcodeNameError {
		t.Fatalf("after removing web: %v %v, want NXDOMAIN", r, err)
	}
}

type rcodeError struct{ m *dns.Msg }

func (e *rcodeError) Error() string {
	return "rcode " + dns.RcodeToString[e.m.Rcode] + ", answers " + func() string {
		s := ""
		for _, a := range e.m.Answer {
			s += a.String() + "; "
		}
		return s
	}()
}

func TestParseRejectsOtherVersions(t *testing.T) {
	if _, _, err := nameserver.Parse([]byte(`{"version":"v2","ip4":{}}`)); err == nil {
		t.Fatal("version v2 accepted")
	}
	tbl, skipped, err := nameserver.Parse([]byte(`{"version":"v1alpha1","ip4":{"a.ts.net":["fd00::1","10.0.0.1"]},"ip6":{"a.ts.net":["10.0.0.2"]}}`))
	if err != nil || len(tbl.IP4["a.ts.net."]) != 1 || len(tbl.IP6["a.ts.net."]) != 0 || len(skipped) != 2 {
		t.Fatalf("Parse: %v, skipped %v, err %v; want one IPv4 kept and two addresses skipped", tbl, skipped, err)
	}
}
