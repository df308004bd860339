package main

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"io"
	"math/big"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/log"
)

// writeRSACA writes a CA as kubeadm makes a cluster's (RSA 2048, PKCS#1
// key), as kind's node has it in /etc/kubernetes/pki.
func writeRSACA(t *testing.T, dir string) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "kubernetes"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "ca.crt"), filepath.Join(dir, "ca.key")
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	if err := os.WriteFile(certFile, certPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}), 0o600); err != nil {
		t.Fatal(err)
	}
	pool = x509.NewCertPool()
	pool.AppendCertsFromPEM(certPEM)
	return certFile, keyFile, pool
}

// TestTailnetOnly starts `devcluster tailnet`'s stack on a host address that
// is not loopback's 127.0.0.1 (127.0.0.2 stands for the kind network's
// gateway) with a kubeadm-like cluster CA as the ACME issuer: every URL in
// tailnet.env is on that address, the ACME directory answers over HTTPS
// with a certificate that verifies against the cluster CA alone (what
// pods trust through their service account's ca.crt), tailnet.env tells
// proxies to trust that file, and the API hands out tokens for the OAuth
// client it wrote.
func TestTailnetOnly(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	certFile, keyFile, clusterCA := writeRSACA(t, t.TempDir())
	o := hostTailnetOptions{tailnetOptions: tailnetOptions{tailnets: 1}, issuerCert: certFile, issuerKey: keyFile}
	tn, err := startHostTailnet(ctx, dir, "127.0.0.2", o, log.New(io.Discard))
	if err != nil {
		t.Fatal(err)
	}
	defer tn.close()

	env, err := readEnvFile(filepath.Join(dir, "tailnet.env"))
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"TS_CONTROL_URL", "TS_API_URL"} {
		if !strings.HasPrefix(env[k], "http://127.0.0.2:") {
			t.Errorf("%s=%q, want http://127.0.0.2:PORT", k, env[k])
		}
	}
	dirURL := env["TS_DEBUG_ACME_DIRECTORY_URL"]
	if !strings.HasPrefix(dirURL, "https://127.0.0.2:") || !strings.HasSuffix(dirURL, "/dir") {
		t.Fatalf("TS_DEBUG_ACME_DIRECTORY_URL=%q, want https on 127.0.0.2", dirURL)
	}
	if env["TS_ACME_CA_FILE"] != "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt" {
		t.Errorf("TS_ACME_CA_FILE=%q, want the pods' service account ca.crt", env["TS_ACME_CA_FILE"])
	}
	if _, err := os.Stat(filepath.Join(dir, "ca.pem")); err != nil {
		t.Errorf("ca.pem (the root clients verify tailnet HTTPS with): %v", err)
	}

	// Trusting the cluster CA alone, as a proxy with SSL_CERT_FILE does.
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: clusterCA}}}
	resp, err := hc.Get(dirURL)
	if err != nil {
		t.Fatal(err)
	}
	var directory map[string]any
	err = json.NewDecoder(resp.Body).Decode(&directory)
	resp.Body.Close()
	if err != nil || directory["newOrder"] == nil {
		t.Fatalf("ACME directory: %v %v", directory, err)
	}

	resp, err = http.PostForm(env["TS_API_URL"]+"/api/v2/oauth/token", url.Values{
		"client_id": {env["TS_API_CLIENT_ID"]}, "client_secret": {env["TS_API_CLIENT_SECRET"]}, "grant_type": {"client_credentials"},
	})
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "access_token") {
		t.Fatalf("OAuth token: %d %s", resp.StatusCode, body)
	}
}

// Without an issuer it makes a CA of its own, and tailnet.env points at
// its file (readable by pods that are host processes).
func TestTailnetOnlyOwnIssuer(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	tn, err := startHostTailnet(ctx, dir, "127.0.0.2", hostTailnetOptions{tailnetOptions: tailnetOptions{tailnets: 1}}, log.New(io.Discard))
	if err != nil {
		t.Fatal(err)
	}
	defer tn.close()
	env, err := readEnvFile(filepath.Join(dir, "tailnet.env"))
	if err != nil {
		t.Fatal(err)
	}
	if env["TS_ACME_CA_FILE"] != filepath.Join(dir, "acme-ca.pem") {
		t.Errorf("TS_ACME_CA_FILE=%q", env["TS_ACME_CA_FILE"])
	}
	pem, err := os.ReadFile(env["TS_ACME_CA_FILE"])
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	resp, err := hc.Get(env["TS_DEBUG_ACME_DIRECTORY_URL"])
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if _, err := startHostTailnet(ctx, t.TempDir(), "::1", hostTailnetOptions{}, log.New(io.Discard)); err == nil || !strings.Contains(err.Error(), "want an IPv4 address") {
		t.Errorf("IPv6 host: %v", err)
	}
}
