package acme

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha1"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"reflect"
	"time"
	"unsafe"

	"github.com/letsencrypt/pebble/v2/ca"
	"github.com/letsencrypt/pebble/v2/core"
)

// issuerPair is a CA certificate with its key.
type issuerPair struct {
	cert *x509.Certificate
	der  []byte
	key  crypto.Signer
}

// loadOrCreateChain returns the root and the intermediate that signs
// certificates, kept in dir (root.crt/key, intermediate.crt/key) so that
// certificates issued before a restart still verify against the root
// published after it. Pebble makes a new chain at every start and has no
// option to load one.
func loadOrCreateChain(dir string) (root, inter issuerPair, err error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return root, inter, err
	}
	root, err = loadPair(dir, "root")
	if errors.Is(err, os.ErrNotExist) {
		// A new root makes the old intermediate useless.
		_ = os.Remove(filepath.Join(dir, "intermediate.crt"))
		root, err = newIssuer(dir, "root", "devcluster Pebble Root CA", nil)
	}
	if err != nil {
		return root, inter, err
	}
	inter, err = loadPair(dir, "intermediate")
	if errors.Is(err, os.ErrNotExist) {
		inter, err = newIssuer(dir, "intermediate", "devcluster Pebble Intermediate CA", &root)
	}
	return root, inter, err
}

func loadPair(dir, name string) (issuerPair, error) {
	pair, err := tls.LoadX509KeyPair(filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key"))
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return issuerPair{}, err
		}
		return issuerPair{}, fmt.Errorf("load Pebble %s from %s: %w", name, dir, err)
	}
	cert, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return issuerPair{}, fmt.Errorf("parse Pebble %s: %w", name, err)
	}
	signer, ok := pair.PrivateKey.(crypto.Signer)
	if !ok {
		return issuerPair{}, fmt.Errorf("Pebble %s key is not a signer", name)
	}
	return issuerPair{cert: cert, der: pair.Certificate[0], key: signer}, nil
}

// newIssuer makes a CA certificate like Pebble's (ECDSA P-256, 30 years),
// self-signed when parent is nil, and writes it to dir.
func newIssuer(dir, name, cn string, parent *issuerPair) (issuerPair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return issuerPair{}, err
	}
	pub, err := x509.MarshalPKIXPublicKey(key.Public())
	if err != nil {
		return issuerPair{}, err
	}
	ski := sha1.Sum(pub)
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 63))
	if err != nil {
		return issuerPair{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial, Subject: pkix.Name{CommonName: cn + " " + hex.EncodeToString(ski[:3])},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().AddDate(30, 0, 0),
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, SubjectKeyId: ski[:],
		BasicConstraintsValid: true, IsCA: true,
	}
	signerCert, signerKey := tmpl, crypto.Signer(key)
	if parent != nil {
		signerCert, signerKey = parent.cert, parent.key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, signerCert, key.Public(), signerKey)
	if err != nil {
		return issuerPair{}, fmt.Errorf("create Pebble %s: %w", name, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return issuerPair{}, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return issuerPair{}, err
	}
	// Key first: a certificate without its key is never left behind.
	if err := os.WriteFile(filepath.Join(dir, name+".key"), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		return issuerPair{}, err
	}
	if err := os.WriteFile(filepath.Join(dir, name+".crt"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		return issuerPair{}, err
	}
	return issuerPair{cert: cert, der: der, key: key}, nil
}

// installChain makes Pebble issue from root and inter instead of the chain
// it generated. Pebble keeps its chains in unexported fields
// (CAImpl.chains[i].root and .intermediates[0], each an issuer{key, cert});
// they are set by reflection with every type checked, so a Pebble upgrade
// that changes them fails here with a clear message.
func installChain(authority *ca.CAImpl, root, inter issuerPair) error {
	fail := func(what string) error {
		return fmt.Errorf("acme: Pebble's CAImpl has no %s as expected; update installChain for this Pebble version", what)
	}
	chains := reflect.ValueOf(authority).Elem().FieldByName("chains")
	if !chains.IsValid() || chains.Kind() != reflect.Slice || chains.Len() == 0 {
		return fail("chains slice")
	}
	chain := chains.Index(0)
	if chain.Kind() != reflect.Pointer || chain.Elem().Kind() != reflect.Struct {
		return fail("*chain")
	}
	rootCert := &core.Certificate{ID: hex.EncodeToString(root.cert.SerialNumber.Bytes()), Cert: root.cert, DER: root.der}
	interCert := &core.Certificate{ID: hex.EncodeToString(inter.cert.SerialNumber.Bytes()), Cert: inter.cert, DER: inter.der,
		IssuerChains: [][]*core.Certificate{{rootCert}}}
	rootIssuer := chain.Elem().FieldByName("root")
	inters := chain.Elem().FieldByName("intermediates")
	if !rootIssuer.IsValid() || rootIssuer.Kind() != reflect.Pointer || !inters.IsValid() || inters.Kind() != reflect.Slice || inters.Len() != 1 {
		return fail("chain.root or a one-element chain.intermediates")
	}
	for _, is := range []struct {
		v    reflect.Value
		pair issuerPair
		cert *core.Certificate
	}{{rootIssuer, root, rootCert}, {inters.Index(0), inter, interCert}} {
		if is.v.IsNil() {
			return fail("issuer")
		}
		k, c := is.v.Elem().FieldByName("key"), is.v.Elem().FieldByName("cert")
		if !k.IsValid() || k.Type() != reflect.TypeFor[crypto.Signer]() || !c.IsValid() || c.Type() != reflect.TypeFor[*core.Certificate]() {
			return fail("issuer{key crypto.Signer; cert *core.Certificate}")
		}
		settable(k).Set(reflect.ValueOf(is.pair.key))
		settable(c).Set(reflect.ValueOf(is.cert))
	}
	if !authority.GetRootCert(0).Cert.Equal(root.cert) || !authority.GetIntermediateCert(0).Cert.Equal(inter.cert) {
		return fail("chain that takes the saved root and intermediate")
	}
	return nil
}

func settable(v reflect.Value) reflect.Value {
	return reflect.NewAt(v.Type(), unsafe.Pointer(v.UnsafeAddr())).Elem()
}
