package controlplane

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// ensureServiceAccountKey writes the key the apiserver signs service-account
// tokens with, once; a resumed cluster keeps its key so issued tokens stay valid.
func ensureServiceAccountKey(path string) error {
	if _, err := os.Stat(path); err == nil {
		return nil
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fmt.Errorf("generate service-account key: %w", err)
	}
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return fmt.Errorf("encode service-account key: %w", err)
	}
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), 0o600)
}

// ensureAdminToken returns the admin bearer token, creating the static token
// file on first use.
func ensureAdminToken(path string) (string, error) {
	if b, err := os.ReadFile(path); err == nil {
		token, _, ok := strings.Cut(string(b), ",")
		if !ok || token == "" {
			return "", fmt.Errorf("token file %s is malformed", path)
		}
		return token, nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return "", err
	}
	raw := make([]byte, 24)
	if _, err := rand.Read(raw); err != nil {
		return "", err
	}
	token := hex.EncodeToString(raw)
	line := token + ",admin,admin-uid,system:masters\n"
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return "", err
	}
	return token, os.WriteFile(path, []byte(line), 0o600)
}

// servingCA extracts the self-signed CA that kube-apiserver appends to the
// serving certificate it generates in --cert-dir (the second PEM block).
func servingCA(certFile string) ([]byte, error) {
	b, err := os.ReadFile(certFile)
	if err != nil {
		return nil, err
	}
	var blocks [][]byte
	for {
		var blk *pem.Block
		blk, b = pem.Decode(b)
		if blk == nil {
			break
		}
		blocks = append(blocks, pem.EncodeToMemory(blk))
	}
	if len(blocks) < 2 {
		return nil, fmt.Errorf("%s holds %d PEM blocks, want serving cert + CA", certFile, len(blocks))
	}
	return blocks[len(blocks)-1], nil
}
