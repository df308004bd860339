package proxy

import (
	"crypto/tls"
	"errors"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tailplane/tailplane/internal/testcert"
)

// lookups is a certificate source that counts its calls and serves the
// certificates of certs in turn (the last one from then on), or fails
// while failNext is set.
type lookups struct {
	calls, served atomic.Int64
	certs         []*tls.Certificate
	failNext      atomic.Bool
}

func (l *lookups) fetch(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	l.calls.Add(1)
	if l.failNext.Swap(false) {
		return nil, errors.New("certificate not ready")
	}
	n := int(l.served.Add(1))
	return l.certs[min(n, len(l.certs))-1], nil
}

// handshake runs a real TLS handshake for serverName against getCert and
// returns the serial number of the certificate the client was given.
func handshake(t *testing.T, serverName string, getCert certSource) (int64, error) {
	t.Helper()
	cc, sc := net.Pipe()
	defer cc.Close()
	defer sc.Close()
	srv := tls.Server(sc, &tls.Config{GetCertificate: getCert, MinVersion: tls.VersionTLS12})
	go func() { _ = srv.Handshake(); srv.Close() }()
	//nolint:gosec // the test checks which certificate was served, not its chain
	cli := tls.Client(cc, &tls.Config{ServerName: serverName, InsecureSkipVerify: true, MinVersion: tls.VersionTLS12})
	if err := cli.Handshake(); err != nil {
		return 0, err
	}
	return cli.ConnectionState().PeerCertificates[0].SerialNumber.Int64(), nil
}

func cacheTestCert(t *testing.T, serial int64, name string, notAfter time.Time) *tls.Certificate {
	return testcert.NewCA(t).Issue(t, serial, notAfter, name).TLS
}

const cachedName = "my-app.tail-test.ts.net"

func TestCertCacheLooksUpOnceAMinuteAndServesTheRenewedCertificate(t *testing.T) {
	now := time.Now()
	src := &lookups{certs: []*tls.Certificate{
		cacheTestCert(t, 1, cachedName, now.Add(90*24*time.Hour)),
		cacheTestCert(t, 2, cachedName, now.Add(90*24*time.Hour)), // the renewed one
	}}
	cache := newCertCache(src.fetch, time.Minute, func() time.Time { return now })
	for range 5 {
		serial, err := handshake(t, cachedName, cache.get)
		if err != nil {
			t.Fatal(err)
		}
		if serial != 1 {
			t.Fatalf("served certificate %d, want 1", serial)
		}
	}
	if got := src.calls.Load(); got != 1 {
		t.Fatalf("5 handshakes within a minute looked the certificate up %d times, want 1", got)
	}
	now = now.Add(time.Minute + time.Second)
	serial, err := handshake(t, cachedName, cache.get)
	if err != nil {
		t.Fatal(err)
	}
	if serial != 2 || src.calls.Load() != 2 {
		t.Fatalf("after a minute: served certificate %d after %d lookups, want the renewed one (2) after 2", serial, src.calls.Load())
	}
}

func TestCertCacheKeepsNoFailureAndNoExpiredCertificate(t *testing.T) {
	now := time.Now()
	src := &lookups{certs: []*tls.Certificate{
		cacheTestCert(t, 1, cachedName, now.Add(10*time.Second)), // expires well within the TTL
		cacheTestCert(t, 2, cachedName, now.Add(90*24*time.Hour)),
	}}
	src.failNext.Store(true)
	cache := newCertCache(src.fetch, time.Minute, func() time.Time { return now })
	if _, err := handshake(t, cachedName, cache.get); err == nil {
		t.Fatal("handshake succeeded while the lookup failed")
	}
	// The failure was not kept: the next handshake looks up again.
	if serial, err := handshake(t, cachedName, cache.get); err != nil || serial != 1 {
		t.Fatalf("after a failed lookup: serial %d, err %v; want certificate 1", serial, err)
	}
	now = now.Add(11 * time.Second)
	if serial, err := handshake(t, cachedName, cache.get); err != nil || serial != 2 {
		t.Fatalf("after the cached certificate expired: serial %d, err %v; want certificate 2", serial, err)
	}
	if got := src.calls.Load(); got != 3 {
		t.Fatalf("%d lookups, want 3 (failed, first, after expiry)", got)
	}
}

func TestCertCacheKeysByServerName(t *testing.T) {
	now := time.Now()
	src := &lookups{certs: []*tls.Certificate{
		cacheTestCert(t, 1, cachedName, now.Add(time.Hour)),
		cacheTestCert(t, 2, "other.tail-test.ts.net", now.Add(time.Hour)),
	}}
	cache := newCertCache(src.fetch, time.Minute, func() time.Time { return now })
	for _, c := range []struct {
		name   string
		serial int64
	}{{cachedName, 1}, {"other.tail-test.ts.net", 2}, {"MY-APP.tail-test.ts.net", 1}, {"other.tail-test.ts.net", 2}} {
		serial, err := handshake(t, c.name, cache.get)
		if err != nil || serial != c.serial {
			t.Fatalf("%s: serial %d, err %v; want %d", c.name, serial, err, c.serial)
		}
	}
	if got := src.calls.Load(); got != 2 {
		t.Fatalf("%d lookups for two names, want 2", got)
	}
}

// After a rename, a handshake for the old name gets the unrecognized_name
// alert (the client reads "tls: unrecognized name"), not internal_error,
// and never reaches the certificate lookup; the node's names still serve.
func TestCertSourceAnswersOtherNamesWithUnrecognizedName(t *testing.T) {
	src := &lookups{certs: []*tls.Certificate{cacheTestCert(t, 7, "new.tail-test.ts.net", time.Now().Add(time.Hour))}}
	names := []string{"new.tail-test.ts.net"}
	get := onlyNames(func() []string { return names }, src.fetch)
	if serial, err := handshake(t, "NEW.tail-test.ts.net.", get); err != nil || serial != 7 {
		t.Fatalf("the node's own name: serial %d, err %v", serial, err)
	}
	_, err := handshake(t, "old.tail-test.ts.net", get)
	if err == nil || !strings.Contains(err.Error(), "unrecognized name") {
		t.Fatalf("the old name: %v, want the unrecognized_name alert", err)
	}
	if got := src.calls.Load(); got != 1 {
		t.Fatalf("%d lookups, want 1 (the old name must not be looked up)", got)
	}
}
