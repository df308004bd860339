package testcert

import (
	"crypto/tls"
	"crypto/x509"
	"testing"
	"time"
)

// An issued certificate verifies against the CA's roots for its names, and
// its PEM and tls.Certificate forms are the same key pair.
func TestIssueVerifiesAgainstTheCA(t *testing.T) {
	ca := NewCA(t)
	leaf := ca.Issue(t, 7, time.Now().Add(time.Hour), "my-app.tail-test.ts.net", "other.tail-test.ts.net")
	if _, err := leaf.TLS.Leaf.Verify(x509.VerifyOptions{Roots: ca.Roots, DNSName: "other.tail-test.ts.net"}); err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(leaf.CertPEM, leaf.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	if pair.Leaf.SerialNumber.Int64() != 7 || pair.Leaf.Subject.CommonName != "my-app.tail-test.ts.net" {
		t.Fatalf("serial %v, common name %q", pair.Leaf.SerialNumber, pair.Leaf.Subject.CommonName)
	}
}
