package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"flag"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/charmbracelet/log"

	"github.com/tailplane/tailplane/kind-e2e/internal/acme"
	"github.com/tailplane/tailplane/kind-e2e/internal/pki"
	"github.com/tailplane/tailplane/kind-e2e/internal/tailnet"
)

// serviceAccountCA is where every pod with a service account token finds
// its cluster's CA: the CA that `devcluster tailnet --acme-issuer-*` has
// sign the ACME server's certificate, so proxies trust it through
// SSL_CERT_FILE without a file of devcluster's in their image.
const serviceAccountCA = "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt"

// runTailnetOnly is `devcluster tailnet`: the tailnet of `up` (control
// server, API, DERP, STUN, Pebble and the DNS-01 responder) without a
// cluster, for a cluster that runs elsewhere, such as go tool task
// e2e:kind's kind cluster, whose pods reach this machine at the Docker
// network's gateway (--host). Pebble's TLS certificate is signed by
// --acme-issuer-cert/--acme-issuer-key (e2e:kind: the kind cluster's CA),
// and tailnet.env's TS_ACME_CA_FILE is where pods find that CA
// (--acme-ca-in-pods, default their service account's ca.crt), for the
// ProxyClass's SSL_CERT_FILE. It writes D/tailnet.env and D/ca.pem as `up`
// does, prints "ready tailnet=D/tailnet.env" and runs until SIGINT or
// SIGTERM (`devcluster down --dir D` sends it).
func runTailnetOnly(args []string) error {
	fs := flag.NewFlagSet("tailnet", flag.ExitOnError)
	dir := fs.String("dir", "", "folder for the tailnet's state, tailnet.env and ca.pem; required")
	host := fs.String("host", "127.0.0.1", "IPv4 address of this machine to listen on (control server, API, DERP, STUN, ACME): the one the cluster's pods reach it at")
	var o hostTailnetOptions
	fs.StringVar(&o.issuerCert, "acme-issuer-cert", "", "PEM certificate of the CA that signs the ACME server's TLS certificate, one the cluster's pods trust (kind: /etc/kubernetes/pki/ca.crt of the node); default: a CA of its own in D/pki")
	fs.StringVar(&o.issuerKey, "acme-issuer-key", "", "that CA's PEM private key (RSA, ECDSA or Ed25519)")
	fs.StringVar(&o.caInPods, "acme-ca-in-pods", "", "path, inside the cluster's pods, of the CA that signed the ACME server's certificate (tailnet.env's TS_ACME_CA_FILE); default "+serviceAccountCA+" with --acme-issuer-cert, else D/acme-ca.pem")
	parsedTailnet := o.addFlags(fs)
	_ = fs.Parse(args)
	if err := parsedTailnet(); err != nil {
		return fmt.Errorf("tailnet: %w", err)
	}
	if *dir == "" {
		return errors.New("tailnet: --dir is required")
	}
	if (o.issuerCert == "") != (o.issuerKey == "") {
		return errors.New("tailnet: --acme-issuer-cert and --acme-issuer-key go together")
	}
	abs, err := filepath.Abs(*dir)
	if err != nil {
		return err
	}
	logger := log.NewWithOptions(os.Stderr, log.Options{ReportTimestamp: true, Prefix: "devcluster"})
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	release, err := claimDir(abs, *dir, "tailnet")
	if err != nil {
		return err
	}
	defer release()

	tn, err := startHostTailnet(ctx, abs, *host, o, logger)
	if err != nil {
		return fmt.Errorf("tailnet: %w", err)
	}
	defer tn.close()
	go watchPolicy(ctx, o.tailnetOptions, tn.policyTarget(), logger.WithPrefix("tailnet"))
	logger.Info("tailnet ready", "control", tn.controlURL(), "acme", tn.ca.DirectoryURL)
	fmt.Printf("ready tailnet=%s\n", tn.env)
	<-ctx.Done()
	logger.Info("stopping")
	return nil
}

// hostTailnetOptions are `devcluster tailnet`'s settings besides --dir and
// --host.
type hostTailnetOptions struct {
	tailnetOptions
	issuerCert, issuerKey, caInPods string
}

// startHostTailnet starts the DNS-01 responder, Pebble and the tailnet with
// everything a pod talks to on host, as startTailnet does on loopback for
// `up`, and writes D/tailnet.env, D/ca.pem and D/acme-ca.pem.
func startHostTailnet(ctx context.Context, dir, host string, o hostTailnetOptions, logger *log.Logger) (*tailnetStack, error) {
	ip := net.ParseIP(host)
	if ip == nil || ip.To4() == nil {
		return nil, fmt.Errorf("--host %q: want an IPv4 address of this machine", host)
	}
	issuerPEM, issuer, err := loadIssuer(dir, o.issuerCert, o.issuerKey)
	if err != nil {
		return nil, err
	}
	cert, err := issueServing(issuer, ip)
	if err != nil {
		return nil, err
	}
	acmeCA := filepath.Join(dir, "acme-ca.pem")
	caInPods := o.caInPods
	if caInPods == "" {
		caInPods = acmeCA
		if o.issuerCert != "" {
			caInPods = serviceAccountCA
		}
	}
	dns, err := acme.StartDNS(ctx, "")
	if err != nil {
		return nil, fmt.Errorf("dns-01 server: %w", err)
	}
	anyPort := net.JoinHostPort(host, "0")
	ca, err := acme.Start(ctx, acme.Config{Addr: anyPort, Cert: cert, Resolver: dns.Addr, StateDir: filepath.Join(dir, "pebble"), Logger: logger.WithPrefix("pebble")})
	if err != nil {
		dns.Close()
		return nil, err
	}
	var s *tailnetStack
	var lines []string
	if o.control == controlHeadscale {
		s, lines, err = startHeadscale(ctx, dir, host, o.tailnetOptions, logger)
	} else {
		s, lines, err = startHostTestcontrol(ctx, dir, host, o.tailnetOptions, dns, logger)
	}
	if err != nil {
		ca.Close()
		dns.Close()
		return nil, err
	}
	s.ca, s.dns, s.env, s.root = ca, dns, filepath.Join(dir, "tailnet.env"), filepath.Join(dir, "ca.pem")
	lines = append(lines,
		"# ACME directory for certificates (Pebble); its TLS certificate is signed by the CA",
		"# in acme-ca.pem, which the cluster's pods find at TS_ACME_CA_FILE: SSL_CERT_FILE=$TS_ACME_CA_FILE.",
		"TS_DEBUG_ACME_DIRECTORY_URL="+ca.DirectoryURL,
		"TS_ACME_CA_FILE="+caInPods,
		"# Root of issued certificates: clients verify tailnet HTTPS with it.",
		"TS_CA_FILE="+s.root,
	)
	for _, f := range []struct {
		path string
		data []byte
		mode os.FileMode
	}{{s.root, ca.RootPEM, 0o644}, {acmeCA, issuerPEM, 0o644}, {s.env, []byte(strings.Join(lines, "\n") + "\n"), 0o600}} {
		if err := os.WriteFile(f.path, f.data, f.mode); err != nil {
			s.close()
			return nil, err
		}
	}
	return s, nil
}

// startHostTestcontrol starts devcluster's own tailnet (and the second of
// --tailnets 2) on host for startHostTailnet, and returns the first lines of
// tailnet.env for it.
func startHostTestcontrol(ctx context.Context, dir, host string, o tailnetOptions, dns *acme.DNS, logger *log.Logger) (*tailnetStack, []string, error) {
	tns, err := tailnet.StartShared(ctx, tailnetConfigs(dir, o, dns, logger, func(c *tailnet.Config) {
		c.Addr, c.RelayHost = net.JoinHostPort(host, "0"), host
	})...)
	if err != nil {
		return nil, nil, err
	}
	s := &tailnetStack{net: tns[0]}
	if len(tns) > 1 {
		s.second = tns[1]
	}
	return s, envLines(s, "# devcluster tailnet (devcluster tailnet --host "+host+"); source this file or read it as KEY=VALUE lines."), nil
}

// issuerCA signs the ACME server's certificate.
type issuerCA struct {
	cert *x509.Certificate
	key  any // a crypto.Signer
}

// loadIssuer reads the issuing CA from certFile and keyFile, or (both
// empty) creates one of its own in dir/pki on first use.
func loadIssuer(dir, certFile, keyFile string) ([]byte, issuerCA, error) {
	if certFile == "" {
		own, err := pki.LoadOrCreateCA(filepath.Join(dir, "pki"), "acme-issuer")
		if err != nil {
			return nil, issuerCA{}, err
		}
		certFile, keyFile = own.CertFile, filepath.Join(dir, "pki", "acme-issuer.key")
	}
	certPEM, err := os.ReadFile(certFile)
	if err != nil {
		return nil, issuerCA{}, err
	}
	keyPEM, err := os.ReadFile(keyFile)
	if err != nil {
		return nil, issuerCA{}, err
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, issuerCA{}, fmt.Errorf("ACME issuer %s: %w", certFile, err)
	}
	c, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return nil, issuerCA{}, err
	}
	if !c.IsCA {
		return nil, issuerCA{}, fmt.Errorf("ACME issuer %s is not a CA certificate", certFile)
	}
	return certPEM, issuerCA{cert: c, key: pair.PrivateKey}, nil
}

// issueServing makes the ACME server's certificate for ip, signed by ca.
func issueServing(ca issuerCA, ip net.IP) (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: "devcluster ACME"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().AddDate(1, 0, 0),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: []net.IP{ip}, DNSNames: []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("ACME serving certificate: %w", err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}
