// Package pki makes the small certificate authority devcluster uses between
// its own parts: the kube-apiserver's client certificate for the node's log
// endpoint, that endpoint's serving certificate, and the ACME server's
// serving certificate. Files are created once and reused on resume.
//
// It imports only the standard library.
package pki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// CA is a certificate authority whose key and certificate live in files.
type CA struct {
	Cert    *x509.Certificate
	CertPEM []byte
	// CertFile is the PEM file holding the CA certificate.
	CertFile string
	key      *ecdsa.PrivateKey
}

// LoadOrCreateCA returns the CA stored as dir/name.crt and dir/name.key,
// creating both on first use.
func LoadOrCreateCA(dir, name string) (*CA, error) {
	certFile, keyFile := filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key")
	if certPEM, err := os.ReadFile(certFile); err == nil {
		keyPEM, err := os.ReadFile(keyFile)
		if err != nil {
			return nil, fmt.Errorf("read CA key: %w", err)
		}
		pair, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			return nil, fmt.Errorf("load CA %s: %w", certFile, err)
		}
		cert, err := x509.ParseCertificate(pair.Certificate[0])
		if err != nil {
			return nil, fmt.Errorf("parse CA %s: %w", certFile, err)
		}
		key, ok := pair.PrivateKey.(*ecdsa.PrivateKey)
		if !ok {
			return nil, fmt.Errorf("CA key %s is not ECDSA", keyFile)
		}
		return &CA{Cert: cert, CertPEM: certPEM, CertFile: certFile, key: key}, nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "devcluster " + name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().AddDate(10, 0, 0),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("create CA: %w", err)
	}
	cert, _ := x509.ParseCertificate(der)
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	if err := writePair(certFile, keyFile, certPEM, key); err != nil {
		return nil, err
	}
	return &CA{Cert: cert, CertPEM: certPEM, CertFile: certFile, key: key}, nil
}

// sameNames reports whether cert names exactly ips and dnsNames, in any
// order.
func sameNames(cert *x509.Certificate, ips []net.IP, dnsNames []string) bool {
	if cert == nil || len(cert.IPAddresses) != len(ips) || len(cert.DNSNames) != len(dnsNames) {
		return false
	}
	for _, ip := range ips {
		if !slices.ContainsFunc(cert.IPAddresses, ip.Equal) {
			return false
		}
	}
	for _, n := range dnsNames {
		if !slices.Contains(cert.DNSNames, n) {
			return false
		}
	}
	return true
}

// Pair is a certificate and key written as PEM files.
type Pair struct{ CertFile, KeyFile string }

// Issue returns dir/name.crt and dir/name.key, signed by the CA for the given
// IPs and DNS names (server) or common name (client), creating them once:
// a pair already there is kept while it names the same IPs and DNS names
// (a resumed cluster folder keeps its certificates), and issued again when
// a newer devcluster asks for others.
func (ca *CA) Issue(dir, name, commonName string, client bool, ips []net.IP, dnsNames []string) (Pair, error) {
	p := Pair{CertFile: filepath.Join(dir, name+".crt"), KeyFile: filepath.Join(dir, name+".key")}
	if pair, err := tls.LoadX509KeyPair(p.CertFile, p.KeyFile); err == nil && sameNames(pair.Leaf, ips, dnsNames) {
		return p, nil
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return p, err
	}
	usage := x509.ExtKeyUsageServerAuth
	if client {
		usage = x509.ExtKeyUsageClientAuth
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: commonName},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().AddDate(5, 0, 0),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{usage},
		IPAddresses:  ips,
		DNSNames:     dnsNames,
	}
	if client {
		tmpl.Subject.Organization = []string{"system:masters"}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.key)
	if err != nil {
		return p, fmt.Errorf("issue %s: %w", name, err)
	}
	return p, writePair(p.CertFile, p.KeyFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), key)
}

// Pool returns a certificate pool holding only this CA.
func (ca *CA) Pool() *x509.CertPool {
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	return pool
}

func writePair(certFile, keyFile string, certPEM []byte, key *ecdsa.PrivateKey) error {
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(certFile), 0o700); err != nil {
		return err
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		return err
	}
	return os.WriteFile(certFile, certPEM, 0o644)
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	return n
}
