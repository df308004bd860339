package acme

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/charmbracelet/log"
)

func startPebble(t *testing.T, stateDir string) *CA {
	t.Helper()
	ca, err := Start(t.Context(), Config{Addr: "127.0.0.1:0", Cert: tls.Certificate{}, Resolver: "127.0.0.1:53",
		StateDir: stateDir, Logger: log.New(io.Discard)})
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

// Pebble restarted on the same state issues from the same root and
// intermediate: certificates issued before still verify.
func TestRestartKeepsTheChain(t *testing.T) {
	dir := t.TempDir()
	first := startPebble(t, dir)
	first.Close()
	second := startPebble(t, dir)
	second.Close()
	if !bytes.Equal(first.RootPEM, second.RootPEM) {
		t.Fatal("Pebble's root changed across a restart")
	}
	// Pebble serves the root installed from the state folder, and the
	// intermediate there is what it signs with.
	onDisk, err := os.ReadFile(filepath.Join(dir, "root.crt"))
	if err != nil || !bytes.Equal(onDisk, second.RootPEM) {
		t.Fatalf("the root Pebble serves is not the saved one (%v)", err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "intermediate.crt"))
	if err != nil {
		t.Fatal(err)
	}
	blk, _ := pem.Decode(b)
	inter, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(second.RootPEM)
	if _, err := inter.Verify(x509.VerifyOptions{Roots: roots}); err != nil {
		t.Fatalf("the saved intermediate does not chain to the root: %v", err)
	}
}

func TestStateDirIsRequired(t *testing.T) {
	_, err := Start(t.Context(), Config{Addr: "127.0.0.1:0", Logger: log.New(io.Discard)})
	if err == nil {
		t.Fatal("Start without StateDir succeeded")
	}
}
