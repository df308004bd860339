package tailnet

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	tsapi "tailscale.com/client/tailscale/v2"
	"tailscale.com/ipn/ipnstate"

	"github.com/tailplane/tailplane/kind-e2e/internal/acme"
	"github.com/tailplane/tailplane/kind-e2e/internal/pki"
)

// TestMain makes this process trust a local CA, which TestServiceCertificate
// has sign its ACME server's certificate: tailscale's certificate code
// uses the system roots, read once, from SSL_CERT_FILE, before any test.
func TestMain(m *testing.M) {
	os.Exit(func() int {
		dir, err := os.MkdirTemp("", "tailnet-test-ca-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(dir)
		ca, err := pki.LoadOrCreateCA(dir, "acme-ca")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		_ = os.Setenv("SSL_CERT_FILE", ca.CertFile)
		return m.Run()
	}())
}

// startCA runs Pebble (with its DNS-01 server) as devcluster does, serving
// with a certificate from TestMain's CA; it returns the OnTXT hook for the
// tailnet and Pebble's root.
func startCA(ctx context.Context, t *testing.T) (onTXT func(name, value string), root []byte) {
	t.Helper()
	local, err := pki.LoadOrCreateCA(filepath.Dir(os.Getenv("SSL_CERT_FILE")), "acme-ca")
	if err != nil {
		t.Fatal(err)
	}
	serving, err := local.Issue(t.TempDir(), "acme-serving", "test ACME", false, []net.IP{net.ParseIP("127.0.0.1")}, []string{"localhost"})
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.LoadX509KeyPair(serving.CertFile, serving.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	dns, err := acme.StartDNS(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(dns.Close)
	ca, err := acme.Start(ctx, acme.Config{Addr: "127.0.0.1:0", Cert: cert, Resolver: dns.Addr, StateDir: t.TempDir(), Logger: testLogger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ca.Close)
	t.Setenv("TS_DEBUG_ACME_DIRECTORY_URL", ca.DirectoryURL)
	return func(name, value string) { dns.Set(name, value) }, ca.RootPEM
}

// A service host gets the certificate of the service's name through the
// ACME DNS-01 flow (control accepts its TXT record for that name); a node
// that does not host the service cannot.
func TestServiceCertificate(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	onTXT, root := startCA(ctx, t)
	tn, err := Start(ctx, Config{StateFile: filepath.Join(t.TempDir(), "state.json"), Addr: "127.0.0.1:0",
		MagicDNSDomain: "test.ts.net", Logger: testLogger(), OnTXT: onTXT})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tn.Close)
	createService(ctx, t, tn, tsapi.Service{Name: "svc:secure", Ports: []string{"tcp:443"}})
	host := join(ctx, t, tn, "host", "tag:k8s")
	other := join(ctx, t, tn, "other", "tag:k8s")
	hostService(t, host, "svc:secure", 443, "unused")
	waitStatus(ctx, t, host, "the service's name is a certificate name", func(st *ipnstate.Status) bool {
		return slices.Contains(st.CertDomains, "secure.test.ts.net")
	})

	lc, err := host.LocalClient()
	if err != nil {
		t.Fatal(err)
	}
	chain, _, err := lc.CertPair(ctx, "secure.test.ts.net")
	if err != nil {
		t.Fatalf("the host's certificate for its service: %v", err)
	}
	roots, inters := x509.NewCertPool(), x509.NewCertPool()
	roots.AppendCertsFromPEM(root)
	var leaf *x509.Certificate
	for rest := chain; ; {
		var blk *pem.Block
		if blk, rest = pem.Decode(rest); blk == nil {
			break
		}
		c, err := x509.ParseCertificate(blk.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		if leaf == nil {
			leaf = c
		} else {
			inters.AddCert(c)
		}
	}
	if leaf == nil {
		t.Fatalf("no certificate in %q", chain)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{DNSName: "secure.test.ts.net", Roots: roots, Intermediates: inters}); err != nil {
		t.Fatalf("the service certificate does not verify for secure.test.ts.net against Pebble's root: %v", err)
	}

	olc, err := other.LocalClient()
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := olc.CertPair(ctx, "secure.test.ts.net"); err == nil || !strings.Contains(err.Error(), "invalid domain") {
		t.Fatalf("a node that does not host the service got its certificate or an unexpected error: %v", err)
	}
}
