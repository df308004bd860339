package main

import (
	"cmp"
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/charmbracelet/log"

	"github.com/tailplane/tailplane/kind-e2e/internal/acme"
	"github.com/tailplane/tailplane/kind-e2e/internal/headscale"
	"github.com/tailplane/tailplane/kind-e2e/internal/pki"
	"github.com/tailplane/tailplane/kind-e2e/internal/tailnet"
)

// magicDNSDomain is the tailnet's DNS suffix; secondDNSDomain the second
// tailnet's (--tailnets 2), which shares the first's control server.
const (
	magicDNSDomain  = "devcluster.ts.net"
	secondDNSDomain = "second.devcluster.ts.net"
)

// tailnetStack is the tailnet plus its certificate authority, and the
// second tailnet when asked for.
type tailnetStack struct {
	net    *tailnet.Tailnet // nil with --control headscale
	second *tailnet.Tailnet // nil unless --tailnets 2
	// hs and relay replace net with --control headscale.
	hs    *headscale.Server
	relay *tailnet.Relay
	ca    *acme.CA
	dns   *acme.DNS
	env   string
	root  string
}

func (s *tailnetStack) close() {
	if s.second != nil {
		s.second.Close()
	}
	if s.net != nil {
		s.net.Close()
	}
	if s.hs != nil {
		s.hs.Close()
		s.relay.Close()
	}
	s.ca.Close()
	s.dns.Close()
}

// policyTarget is the control server whose policy --policy edits.
func (s *tailnetStack) policyTarget() policySetter {
	if s.hs != nil {
		return s.hs
	}
	return s.net
}

// controlURL is where nodes log in.
func (s *tailnetStack) controlURL() string {
	if s.hs != nil {
		return s.hs.URL
	}
	return s.net.URL
}

// startTailnet starts the DNS-01 responder, Pebble and the tailnet (and,
// with o.tailnets 2, a second tailnet behind the same control server and
// API, with an OAuth client of its own, for Tailnet objects), then writes D/ca.pem (Pebble's root),
// D/acme-ca.pem (the ACME server's CA) and D/tailnet.env. A non-empty
// o.policy replaces the tailnets' policy files.
//
// Everything a node or the operator talks to (control server, API, DERP,
// STUN, ACME) listens on host: 127.0.0.1 for the process node, whose pods
// are host processes; the bridge address for the real node, whose pods'
// network namespaces reach the host there and not on loopback.
//
// podCAFile is where a pod reads the ACME server's CA (devcluster's local
// CA): controlplane.PodCAFile, since the control plane adds the local CA to
// every pod's service-account CA bundle; "" means the host file.
// tailnet.env has it as TS_POD_ACME_CA_FILE.
func startTailnet(ctx context.Context, dir, host, podCAFile string, o tailnetOptions, localCA *pki.CA, logger *log.Logger) (*tailnetStack, error) {
	dns, err := acme.StartDNS(ctx, "")
	if err != nil {
		return nil, fmt.Errorf("dns-01 server: %w", err)
	}
	serving, err := localCA.Issue(filepath.Join(dir, "pki"), "acme-serving", "devcluster ACME", false, []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP(host)}, []string{"localhost"})
	if err != nil {
		dns.Close()
		return nil, err
	}
	cert, err := tls.LoadX509KeyPair(serving.CertFile, serving.KeyFile)
	if err != nil {
		dns.Close()
		return nil, err
	}
	// Both listen where they did before, when they can: pods and clients
	// started earlier keep the URLs they were given.
	ca, err := onSameAddr(filepath.Join(dir, "acme.addr"), host, func(addr string) (*acme.CA, error) {
		return acme.Start(ctx, acme.Config{Addr: addr, Cert: cert, Resolver: dns.Addr, StateDir: filepath.Join(dir, "pebble"), Logger: logger.WithPrefix("pebble")})
	}, func(ca *acme.CA) string { return hostPort(ca.DirectoryURL) })
	if err != nil {
		dns.Close()
		return nil, err
	}
	// Off loopback, Tailscale's clients may dial the control server's host
	// on port 443 over TLS (tailnet.Config.TLSAddr); the serving certificate
	// of the ACME server (the local CA's, for host) serves there too.
	tlsAddr := func(host string) string {
		if host == "127.0.0.1" {
			return ""
		}
		return net.JoinHostPort(host, "443")
	}
	var s *tailnetStack
	var lines []string
	if o.control == controlHeadscale {
		s, lines, err = startHeadscale(ctx, dir, host, o, logger)
	} else {
		s, lines, err = startTestcontrol(ctx, dir, host, tlsAddr, &cert, o, dns, logger)
	}
	if err != nil {
		ca.Close()
		dns.Close()
		return nil, err
	}
	s.ca, s.dns, s.env, s.root = ca, dns, filepath.Join(dir, "tailnet.env"), filepath.Join(dir, "ca.pem")
	acmeCA := filepath.Join(dir, "acme-ca.pem")
	lines = append(lines,
		"# ACME directory for certificates (Pebble); processes requesting certificates",
		"# must trust the ACME server: SSL_CERT_FILE=$TS_ACME_CA_FILE.",
		"TS_DEBUG_ACME_DIRECTORY_URL="+ca.DirectoryURL,
		"TS_ACME_CA_FILE="+acmeCA,
		"# The same CA as a pod reads it (the real node's containers see no host file).",
		"TS_POD_ACME_CA_FILE="+cmp.Or(podCAFile, acmeCA),
		"# Root of issued certificates: clients verify tailnet HTTPS with it.",
		"TS_CA_FILE="+s.root,
	)
	env := strings.Join(lines, "\n") + "\n"
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

// startTestcontrol starts devcluster's own tailnet (and the second one of
// --tailnets 2, behind the same control server) and returns the first
// lines of tailnet.env for it: the control server, the API and the OAuth
// clients. tlsAddr gives the TLS address of a host ("" for none).
func startTestcontrol(ctx context.Context, dir, host string, tlsAddr func(host string) string, cert *tls.Certificate, o tailnetOptions, dns *acme.DNS, logger *log.Logger) (*tailnetStack, []string, error) {
	tns, err := onSameAddr(filepath.Join(dir, "tailnet.addr"), host, func(addr string) ([]*tailnet.Tailnet, error) {
		return tailnet.StartShared(ctx, tailnetConfigs(dir, o, dns, logger, func(c *tailnet.Config) {
			c.Addr, c.RelayHost, c.TLSAddr, c.TLSCert = addr, host, tlsAddr(host), cert
		})...)
	}, func(tns []*tailnet.Tailnet) string { return hostPort(tns[0].URL) })
	if err != nil {
		return nil, nil, err
	}
	s := &tailnetStack{net: tns[0]}
	if len(tns) > 1 {
		s.second = tns[1]
	}
	return s, envLines(s, "# devcluster tailnet; source this file or read it as KEY=VALUE lines."), nil
}

// tailnetConfigs are the configurations of devcluster's tailnet and, with
// --tailnets 2, of the second one, which shares the first's control server
// (serve sets where it listens): its own state, MagicDNS domain and OAuth
// client, without the first's client tags and groups.
func tailnetConfigs(dir string, o tailnetOptions, dns *acme.DNS, logger *log.Logger, serve func(*tailnet.Config)) []tailnet.Config {
	onTXT := func(name, value string) { dns.Set(name, value) }
	first := tailnet.Config{
		StateFile: filepath.Join(dir, "tailnet-state.json"), MagicDNSDomain: magicDNSDomain, Policy: o.policy,
		ClientTags: o.clientTags, Groups: o.groups, OnTXT: onTXT, Logger: logger.WithPrefix("tailnet"), Federation: o.federation,
	}
	serve(&first)
	cfgs := []tailnet.Config{first}
	if o.tailnets > 1 {
		cfgs = append(cfgs, tailnet.Config{
			StateFile: filepath.Join(dir, "tailnet2-state.json"), MagicDNSDomain: secondDNSDomain, Policy: o.policy,
			OnTXT: onTXT, Logger: logger.WithPrefix("tailnet2"),
		})
	}
	return cfgs
}

// envLines are tailnet.env's lines for the tailnets of s, after header.
// The second tailnet's SECOND_TS_* name the same control and API URL as
// the first's, as on Tailscale: its OAuth client and auth keys are what
// set it apart.
func envLines(s *tailnetStack, header string) []string {
	tn := s.net
	lines := []string{
		header,
		"TS_CONTROL_URL=" + tn.URL,
		"TS_API_URL=" + tn.URL,
		"TS_API_CLIENT_ID=" + tn.ClientID,
		"TS_API_CLIENT_SECRET=" + tn.ClientSecret,
		"TS_MAGICDNS_DOMAIN=" + tn.MagicDNSDomain,
	}
	if id, aud := tn.FederatedClient(); id != "" {
		lines = append(lines,
			"# A workload identity federation client of the same tailnet: API tokens for the",
			"# cluster's own ServiceAccount tokens of the operator (tailscale/operator) with",
			"# this audience (the chart's oauth.clientId and oauth.audience; devinstall --workload-identity).",
			"TS_API_FEDERATED_CLIENT_ID="+id,
			"TS_API_FEDERATED_AUDIENCE="+aud)
	}
	if s.second != nil {
		lines = append(lines,
			"# The second tailnet (--tailnets 2), behind the same control server and API",
			"# as the first, told apart by its OAuth client: put that client in a Secret of",
			"# the operator namespace (client_id, client_secret) and name it in a Tailnet",
			"# (spec.loginUrl: SECOND_TS_CONTROL_URL); devcluster curl --tailnet 2 joins it.",
			"SECOND_TS_CONTROL_URL="+s.second.URL,
			"SECOND_TS_API_URL="+s.second.URL,
			"SECOND_TS_API_CLIENT_ID="+s.second.ClientID,
			"SECOND_TS_API_CLIENT_SECRET="+s.second.ClientSecret,
			"SECOND_TS_MAGICDNS_DOMAIN="+s.second.MagicDNSDomain)
	}
	return lines
}

// onSameAddr starts a server on the address saved in file (any port of
// host the first time, when that one is taken, or when the saved address is
// another host's) and saves the address it got.
func onSameAddr[T any](file, host string, start func(addr string) (T, error), addrOf func(T) string) (T, error) {
	anyPort := net.JoinHostPort(host, "0")
	addr := anyPort
	if b, err := os.ReadFile(file); err == nil {
		if h, _, err := net.SplitHostPort(strings.TrimSpace(string(b))); err == nil && h == host {
			addr = strings.TrimSpace(string(b))
		}
	}
	v, err := start(addr)
	if err != nil && addr != anyPort {
		v, err = start(anyPort)
	}
	if err != nil {
		return v, err
	}
	_ = os.WriteFile(file, []byte(addrOf(v)), 0o644)
	return v, nil
}

// hostPort is the host:port of a URL.
func hostPort(u string) string {
	if p, err := url.Parse(u); err == nil {
		return p.Host
	}
	return u
}
