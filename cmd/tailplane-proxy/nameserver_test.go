package main

import (
	"context"
	"io"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/charmbracelet/log"
	"github.com/miekg/dns"

	"github.com/tailplane/tailplane/internal/testpoll"
)

// `tailplane-proxy nameserver` with the operator's flags answers the
// records file's names over UDP and TCP.
func TestNameserverSubcommandAnswers(t *testing.T) {
	dir := t.TempDir()
	records := filepath.Join(dir, "records.json")
	if err := os.WriteFile(records, []byte(`{"version":"v1alpha1","ip4":{"db.tail1.ts.net":["10.244.0.8"]}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	// A free port for both protocols.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- runNameserver(ctx, []string{"--records", records, "--listen", addr}, io.Discard, log.New(io.Discard))
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("nameserver: %v", err)
		}
	})
	for _, network := range []string{"udp", "tcp"} {
		testpoll.Until(t, 10*time.Second, network+" answer", func() error {
			m := new(dns.Msg)
			m.SetQuestion("db.tail1.ts.net.", dns.TypeA)
			r, _, err := (&dns.Client{Net: network, Timeout: time.Second}).Exchange(m, addr)
			if err != nil {
				return err
			}
			if r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 || r.Answer[0].(*dns.A).A.String() != "10.244.0.8" {
				return &net.DNSError{Err: r.String(), Name: "db.tail1.ts.net"}
			}
			return nil
		})
	}
}
