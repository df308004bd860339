package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"

	"github.com/charmbracelet/log"

	"github.com/tailplane/tailplane/kind-e2e/internal/acme"
	"github.com/tailplane/tailplane/kind-e2e/internal/pki"
	"github.com/tailplane/tailplane/kind-e2e/internal/tailnet"
)

// magicDNSDomain is the tailnet's DNS suffix.
const magicDNSDomain = "devcluster.ts.net"

// tailnetStack is the tailnet plus its certificate authority.
type tailnetStack struct {
	net  *tailnet.Tailnet
	ca   *acme.CA
	dns  *acme.DNS
	env  string
	root string
}

func (s *tailnetStack) close() {
	s.net.Close()
	s.ca.Close()
	s.dns.Close()
}

// startTailnet starts the DNS-01 responder, Pebble and the tailnet, then
// writes D/ca.pem (Pebble's root), D/acme-ca.pem (the ACME server's CA) and
// D/tailnet.env.
func startTailnet(ctx context.Context, dir string, localCA *pki.CA, logger *log.Logger) (*tailnetStack, error) {
	dns, err := acme.StartDNS(ctx, "")
	if err != nil {
		return nil, fmt.Errorf("dns-01 server: %w", err)
	}
	serving, err := localCA.Issue(filepath.Join(dir, "pki"), "acme-serving", "devcluster ACME", false, []net.IP{net.ParseIP("127.0.0.1")}, []string{"localhost"})
	if err != nil {
		dns.Close()
		return nil, err
	}
	cert, err := tls.LoadX509KeyPair(serving.CertFile, serving.KeyFile)
	if err != nil {
		dns.Close()
		return nil, err
	}
	ca, err := acme.Start(ctx, acme.Config{Addr: "127.0.0.1:0", Cert: cert, Resolver: dns.Addr, Logger: logger.WithPrefix("pebble")})
	if err != nil {
		dns.Close()
		return nil, err
	}
	addr := "127.0.0.1:0"
	addrFile := filepath.Join(dir, "tailnet.addr")
	if b, err := os.ReadFile(addrFile); err == nil {
		addr = strings.TrimSpace(string(b))
	}
	tn, err := tailnet.Start(ctx, tailnet.Config{
		StateFile: filepath.Join(dir, "tailnet-state.json"), Addr: addr, MagicDNSDomain: magicDNSDomain,
		OnTXT: func(name, value string) { dns.Set(name, value) }, Logger: logger.WithPrefix("tailnet"),
	})
	if err != nil && addr != "127.0.0.1:0" {
		// The old port is taken: take any.
		tn, err = tailnet.Start(ctx, tailnet.Config{
			StateFile: filepath.Join(dir, "tailnet-state.json"), Addr: "127.0.0.1:0", MagicDNSDomain: magicDNSDomain,
			OnTXT: func(name, value string) { dns.Set(name, value) }, Logger: logger.WithPrefix("tailnet"),
		})
	}
	if err != nil {
		ca.Close()
		dns.Close()
		return nil, err
	}
	s := &tailnetStack{net: tn, ca: ca, dns: dns, env: filepath.Join(dir, "tailnet.env"), root: filepath.Join(dir, "ca.pem")}
	_ = os.WriteFile(addrFile, []byte(strings.TrimPrefix(tn.URL, "http://")), 0o644)
	acmeCA := filepath.Join(dir, "acme-ca.pem")
	env := strings.Join([]string{
		"# devcluster tailnet; source this file or read it as KEY=VALUE lines.",
		"TS_CONTROL_URL=" + tn.URL,
		"TS_API_URL=" + tn.URL,
		"TS_API_CLIENT_ID=" + tn.ClientID,
		"TS_API_CLIENT_SECRET=" + tn.ClientSecret,
		"TS_MAGICDNS_DOMAIN=" + tn.MagicDNSDomain,
		"# ACME directory for certificates (Pebble); processes requesting certificates",
		"# must trust the ACME server: SSL_CERT_FILE=$TS_ACME_CA_FILE.",
		"TS_DEBUG_ACME_DIRECTORY_URL=" + ca.DirectoryURL,
		"TS_ACME_CA_FILE=" + acmeCA,
		"# Root of issued certificates: clients verify tailnet HTTPS with it.",
		"TS_CA_FILE=" + s.root,
	}, "\n") + "\n"
	for _, f := range []struct {
		path string
		data []byte
		mode os.FileMode
	}{{s.root, ca.RootPEM, 0o644}, {acmeCA, localCA.CertPEM, 0o644}, {s.env, []byte(env), 0o600}} {
		if err := os.WriteFile(f.path, f.data, f.mode); err != nil {
			s.close()
			return nil, err
		}
	}
	return s, nil
}
