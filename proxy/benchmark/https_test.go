package benchmark

import (
	"crypto/tls"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/tailplane/tailplane/internal/tailnettest"
	"github.com/tailplane/tailplane/internal/testcert"
	"github.com/tailplane/tailplane/proxy/config"
)

// acmeDirectoryEnv points tailscale's certificate code at a directory that
// is not Let's Encrypt's, so that a cached certificate from another CA (the
// benchmark's own) is served without an ACME order; the address refuses
// connections, so the renewal-info check fails at once and falls back to
// the certificate's expiry.
const acmeDirectoryEnv = "TS_DEBUG_ACME_DIRECTORY_URL=http://127.0.0.1:9/directory"

// BenchmarkProxyHTTPS is BenchmarkProxy over HTTPS, the path of an
// Ingress: tailplane-proxy in tailscale-cert mode (with the http-redirect
// listener on :80, as the seed's Ingress asks) and tailscale serve with
// `TCP 443 HTTPS`, each serving its node's certificate from its state
// folder, where the benchmark put a certificate of its own CA (ECDSA P-256,
// the key type of tailscale's ACME certificates). The client speaks
// HTTP/1.1 over TLS with keep-alive (keepalive) or with a new connection
// and TLS handshake for every request (handshake), or HTTP/2 (h2).
func BenchmarkProxyHTTPS(b *testing.B) {
	tn := tailnettest.New(b)
	backend := startBackend(b)
	proxyBin, serveBin := buildBinaries(b)
	client := tn.Node(b, "bench-client")
	ca := testcert.NewCA(b)

	dir := b.TempDir()
	writeNodeCert(b, ca, filepath.Join(dir, "tp"), tailnettest.FQDN("bench-proxy"))
	writeNodeCert(b, ca, filepath.Join(dir, "serve"), tailnettest.FQDN("bench-serve"))
	tp := startTailplaneProxy(b, proxyBin, dir, tn.ControlURL, &config.L7{HTTPRedirect: true, DefaultBackend: &config.Backend{Service: "bench", Address: backend}}, acmeDirectoryEnv)
	sv := startProc(b, []string{acmeDirectoryEnv}, serveBin, "-control", tn.ControlURL, "-hostname", "bench-serve", "-https",
		"-backend", "http://"+backend, "-dir", filepath.Join(dir, "serve"))

	for _, mode := range []struct {
		name       string
		keepAlives bool
		h2         bool
	}{{"keepalive", true, false}, {"handshake", false, false}, {"h2", true, true}} {
		tlsConf := &tls.Config{RootCAs: ca.Roots, MinVersion: tls.VersionTLS12}
		if mode.h2 {
			// HTTP/2 over TLS only (ALPN h2; newTarget checks every
			// response's protocol): the 8 workers share its streams.
			tlsConf.NextProtos = []string{"h2"}
		}
		targets := []*target{
			newTarget(b, client, "tailplane", tp.Process.Pid, "bench-proxy", tlsConf),
			newTarget(b, client, "serve", sv.Process.Pid, "bench-serve", tlsConf),
		}
		for _, t := range targets {
			t.client.Transport.(*http.Transport).DisableKeepAlives = !mode.keepAlives
		}
		pair := &sideBySide{targets: targets}
		pair.run(b, mode.name, (*target).small, "req/s", "p99-ms", "cpu-us/req")
	}
}

// writeNodeCert issues a certificate for fqdn and stores it where
// tailscale's certificate code looks for a cached one of a node whose
// state folder is stateDir (certs/<fqdn>.crt and .key).
func writeNodeCert(b *testing.B, ca *testcert.CA, stateDir, fqdn string) {
	b.Helper()
	leaf := ca.Issue(b, time.Now().UnixNano(), time.Now().Add(24*time.Hour), fqdn)
	certs := filepath.Join(stateDir, "certs")
	if err := os.MkdirAll(certs, 0o700); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(certs, fqdn+".crt"), leaf.CertPEM, 0o644); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(certs, fqdn+".key"), leaf.KeyPEM, 0o600); err != nil {
		b.Fatal(err)
	}
}
