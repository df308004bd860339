package acme

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/charmbracelet/log"
	xacme "golang.org/x/crypto/acme"

	"github.com/tailplane/tailplane/kind-e2e/internal/pki"
)

// retryAfters records every Retry-After header Pebble answers with.
type retryAfters struct {
	next http.RoundTripper
	mu   sync.Mutex
	seen []string
}

func (r *retryAfters) RoundTrip(req *http.Request) (*http.Response, error) {
	res, err := r.next.RoundTrip(req)
	if err == nil && res.Header.Get("Retry-After") != "" {
		r.mu.Lock()
		r.seen = append(r.seen, res.Header.Get("Retry-After"))
		r.mu.Unlock()
	}
	return res, err
}

// A whole DNS-01 order asks the client to wait at most a second between
// polls: Tailscale's client polls as soon as it answered, and a longer
// Retry-After (Pebble's usual 5 s on a finalized order) made a
// certificate take 6 s whenever issuance had not finished by then.
func TestPollsAreAskedToWaitASecondAtMost(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	local, err := pki.LoadOrCreateCA(t.TempDir(), "acme-ca")
	if err != nil {
		t.Fatal(err)
	}
	serving, err := local.Issue(t.TempDir(), "acme-serving", "test ACME", false, []net.IP{net.ParseIP("127.0.0.1")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.LoadX509KeyPair(serving.CertFile, serving.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	dns, err := StartDNS(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(dns.Close)
	ca, err := Start(ctx, Config{Addr: "127.0.0.1:0", Cert: cert, Resolver: dns.Addr, StateDir: t.TempDir(), Logger: log.New(io.Discard)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ca.Close)

	roots := x509.NewCertPool()
	pemCA, _ := os.ReadFile(local.CertFile)
	roots.AppendCertsFromPEM(pemCA)
	rec := &retryAfters{next: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}}
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	client := &xacme.Client{Key: key, DirectoryURL: ca.DirectoryURL, HTTPClient: &http.Client{Transport: rec}}
	if _, err := client.Register(ctx, &xacme.Account{}, xacme.AcceptTOS); err != nil {
		t.Fatal(err)
	}
	order, err := client.AuthorizeOrder(ctx, xacme.DomainIDs("node.test.ts.net"))
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range order.AuthzURLs {
		az, err := client.GetAuthorization(ctx, u)
		if err != nil {
			t.Fatal(err)
		}
		for _, ch := range az.Challenges {
			if ch.Type != "dns-01" {
				continue
			}
			rr, err := client.DNS01ChallengeRecord(ch.Token)
			if err != nil {
				t.Fatal(err)
			}
			dns.Set("_acme-challenge.node.test.ts.net", rr)
			if _, err := client.Accept(ctx, ch); err != nil {
				t.Fatal(err)
			}
		}
	}
	if order, err = client.WaitOrder(ctx, order.URI); err != nil {
		t.Fatal(err)
	}
	certKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	csr, _ := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{DNSNames: []string{"node.test.ts.net"}}, certKey)
	if _, _, err := client.CreateOrderCert(ctx, order.FinalizeURL, csr, true); err != nil {
		t.Fatal(err)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.seen) == 0 {
		t.Fatal("no Retry-After at all: Pebble answers a finalized order with one")
	}
	for _, v := range rec.seen {
		var wait time.Duration
		if s, err := strconv.Atoi(v); err == nil {
			wait = time.Duration(s) * time.Second
		} else if at, err := http.ParseTime(v); err == nil {
			wait = time.Until(at)
		} else {
			t.Fatalf("Retry-After %q is neither seconds nor a date", v)
		}
		if wait > 1500*time.Millisecond {
			t.Errorf("Retry-After %q asks the client to wait %v; want at most 1 s", v, wait.Round(time.Millisecond))
		}
	}
}
