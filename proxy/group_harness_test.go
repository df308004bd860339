package proxy

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"tailscale.com/tailcfg"
	"tailscale.com/tsnet"

	"github.com/tailplane/tailplane/internal/proxystate"
	"github.com/tailplane/tailplane/internal/tailnettest"
	"github.com/tailplane/tailplane/internal/testpoll"
)

// vipAddrs are the addresses control gives one Tailscale Service: inside
// the tailnet ranges (100.64.0.0/10, fd7a:115c:a1e0::/48) like real ones,
// and apart from the node addresses testcontrol hands out (100.64.x.y).
func vipAddrs(n int) []netip.Addr {
	return []netip.Addr{netip.AddrFrom4([4]byte{100, 99, 0, byte(n)}),
		netip.MustParseAddr(fmt.Sprintf("fd7a:115c:a1e0::99:%d", n))}
}

// hostServices does control's part for a node that advertises Tailscale
// Services: the service-host capability with each service's addresses,
// and the addresses routed to the node, so that peers send it the
// service traffic (control's "this replica hosts these services").
// Passing no services takes them all away.
func hostServices(t *testing.T, tn *tailnettest.Tailnet, node *tsnet.Server, services map[string][]netip.Addr) {
	t.Helper()
	k := nodeKey(t, node)
	m := tailcfg.ServiceIPMappings{}
	var routes []netip.Prefix
	for name, addrs := range services {
		m[tailcfg.ServiceName(name)] = addrs
		for _, a := range addrs {
			routes = append(routes, netip.PrefixFrom(a, a.BitLen()))
		}
	}
	raw, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	tn.Control.SetNodeCapMap(k, tailcfg.NodeCapMap{tailcfg.NodeAttrServiceHost: []tailcfg.RawMessage{tailcfg.RawMessage(raw)}})
	tn.Control.SetSubnetRoutes(k, routes)
}

// advertisedServices is the node's prefs' AdvertiseServices.
func advertisedServices(t *testing.T, node *tsnet.Server) []string {
	t.Helper()
	lc, err := node.LocalClient()
	if err != nil {
		t.Fatal(err)
	}
	p, err := lc.GetPrefs(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return p.AdvertiseServices
}

// waitServices waits until the node advertises exactly want (sorted).
func waitServices(t *testing.T, node *tsnet.Server, want ...string) {
	t.Helper()
	testpoll.Until(t, 20*time.Second, fmt.Sprintf("node advertises %v", want), func() error {
		got := slices.Sorted(slices.Values(advertisedServices(t, node)))
		if !slices.Equal(got, want) {
			return fmt.Errorf("advertises %v", got)
		}
		return nil
	})
}

// testCA signs serving certificates, as the ACME CA does for the tailnet.
type testCA struct {
	cert   *x509.Certificate
	key    *ecdsa.PrivateKey
	roots  *x509.CertPool
	serial atomic.Int64
}

func newTestCA(t *testing.T) *testCA {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test ACME CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(90 * 24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	ca := &testCA{key: key, roots: x509.NewCertPool()}
	ca.cert, _ = x509.ParseCertificate(der)
	ca.roots.AddCert(ca.cert)
	ca.serial.Store(100)
	return ca
}

// issue returns a certificate for domain, valid for lifetime from an hour
// ago, and its serial number.
func (ca *testCA) issue(domain string, lifetime time.Duration) (certPEM, keyPEM []byte, serial int64, err error) {
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	serial = ca.serial.Add(1)
	notBefore := time.Now().Add(-time.Hour)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: domain}, DNSNames: []string{domain},
		NotBefore: notBefore, NotAfter: notBefore.Add(lifetime),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		return nil, nil, 0, err
	}
	keyDER, _ := x509.MarshalECPrivateKey(key)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), serial, nil
}

// vipHTTPS is an HTTPS client that reaches addr (a service address and
// port) over the tailnet from client, verifying the name against roots.
func vipHTTPS(client *tsnet.Server, addr netip.AddrPort, roots *x509.CertPool) *http.Client {
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return dialOverTailnet(ctx, client, "tcp", addr)
		},
		TLSClientConfig:   &tls.Config{RootCAs: roots},
		ForceAttemptHTTP2: true,
	}
	return &http.Client{Transport: tr, Timeout: 10 * time.Second}
}

// serviceReport reads the Tailscale Services report (proxystate.KeyServices)
// from the state Secret ns/name.
func serviceReport(ctx context.Context, cs kubernetes.Interface, ns, name string) (map[string]proxystate.ServiceReport, error) {
	sec, err := cs.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	var rep map[string]proxystate.ServiceReport
	if err := json.Unmarshal(sec.Data[proxystate.KeyServices], &rep); err != nil {
		return nil, fmt.Errorf("%s: %w", proxystate.KeyServices, err)
	}
	return rep, nil
}

// squatUDP binds ap (a service address and port) on node before the
// proxy does, as another program holding the port would.
func squatUDP(t *testing.T, node *tsnet.Server, ap netip.AddrPort) net.PacketConn {
	t.Helper()
	var pc net.PacketConn
	testpoll.Until(t, 20*time.Second, "the squatter binds "+ap.String(), func() (err error) {
		pc, err = node.ListenPacket("udp", ap.String())
		return err
	})
	return pc
}

// waitUnservable waits until rec reports service not advertised, with an
// error that contains want.
func waitUnservable(t *testing.T, rec *statusRecorder, service, want string) {
	t.Helper()
	testpoll.Until(t, 10*time.Second, service+" reported unservable", func() error {
		got := rec.getServices()[service]
		if got.Advertised || !strings.Contains(got.Error, want) {
			return fmt.Errorf("report %v", rec.getServices())
		}
		return nil
	})
}

// readOverTLS completes a TLS handshake for sni on c, verified against
// roots, and returns what the server sends until it closes.
func readOverTLS(ctx context.Context, c net.Conn, sni string, roots *x509.CertPool) (string, error) {
	tc := tls.Client(c, &tls.Config{ServerName: sni, RootCAs: roots})
	defer tc.Close()
	if err := tc.HandshakeContext(ctx); err != nil {
		return "", fmt.Errorf("handshake for %s: %w", sni, err)
	}
	b, err := io.ReadAll(tc)
	return string(b), err
}
