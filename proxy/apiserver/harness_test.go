package apiserver

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"net/netip"
	"os"
	"testing"
	"time"

	"github.com/charmbracelet/log"
	authnv1 "k8s.io/api/authentication/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"tailscale.com/tsnet"

	"github.com/tailplane/tailplane/internal/tailnettest"
	"github.com/tailplane/tailplane/internal/testenv"
)

var env = testenv.New()

func TestMain(m *testing.M) { os.Exit(env.Run(m)) }

// proxyHost is the proxy device's hostname in every test.
const proxyHost = "apiproxy"

// fixture is a tailnet with the API server proxy running (through Serve,
// as the operator runs it) on its own device, in front of testenv's API
// server with admin credentials.
type fixture struct {
	tn     *tailnettest.Tailnet
	node   *tsnet.Server
	addr   netip.AddrPort // the proxy's tailnet address, port 443
	domain string
	caPEM  []byte // trusts the proxy's serving certificate
}

func newFixture(t *testing.T, mode Mode) *fixture {
	t.Helper()
	tn := tailnettest.New(t, tailnettest.WithTagOwners(map[string][]string{"tag:ci": nil}))
	f := &fixture{tn: tn, node: tn.Node(t, proxyHost), domain: tailnettest.FQDN(proxyHost)}
	ip4, _ := f.node.TailscaleIPs()
	f.addr = netip.AddrPortFrom(ip4, 443)
	// testcontrol issues no certificates: a test CA stands in for the
	// node's MagicDNS certificate.
	cert, caPEM := selfSigned(t, f.domain)
	f.caPEM = caPEM
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Serve(ctx, f.node, ServeOptions{Upstream: env.Config(t), Mode: mode, Logger: testLogger(t),
			GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return cert, nil }})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return f
}

// client is a Kubernetes client on the tailnet device from, talking to the
// proxy under its MagicDNS name; token and the impersonation in imp are
// what the client itself sends.
func (f *fixture) client(t *testing.T, from *tsnet.Server, token string, imp rest.ImpersonationConfig) kubernetes.Interface {
	t.Helper()
	cs, err := kubernetes.NewForConfig(f.restConfig(from, token, imp))
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

func (f *fixture) restConfig(from *tsnet.Server, token string, imp rest.ImpersonationConfig) *rest.Config {
	return &rest.Config{
		Host:            "https://" + f.domain,
		BearerToken:     token,
		Impersonate:     imp,
		TLSClientConfig: rest.TLSClientConfig{CAData: f.caPEM},
		Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return from.Dial(ctx, "tcp", f.addr.String())
		},
		Timeout: 20 * time.Second,
		QPS:     -1,
	}
}

// selfSigned is a self-signed serving certificate for domain, and its PEM
// for clients to trust.
func selfSigned(t *testing.T, domain string) (*tls.Certificate, []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: domain}, DNSNames: []string{domain},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, _ := x509.ParseCertificate(der)
	return &tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf},
		pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// whoami is the user the API server sees for cs (SelfSubjectReview).
func whoami(ctx context.Context, cs kubernetes.Interface) (authnv1.UserInfo, error) {
	r, err := cs.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authnv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		return authnv1.UserInfo{}, err
	}
	return r.Status.UserInfo, nil
}

// loginName is the tailnet login of a user device.
func loginName(t *testing.T, node *tsnet.Server) string {
	t.Helper()
	lc, err := node.LocalClient()
	if err != nil {
		t.Fatal(err)
	}
	st, err := lc.Status(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	u, ok := st.User[st.Self.UserID]
	if !ok || u.LoginName == "" {
		t.Fatal(errors.New("the device has no login name"))
	}
	return u.LoginName
}

// grantRole lets subject do verbs on resources in ns.
func grantRole(t *testing.T, ns, name string, subject rbacv1.Subject, resources []string, verbs ...string) {
	t.Helper()
	ctx := context.Background()
	cs := env.Clientset(t)
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: name},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: resources, Verbs: verbs}}}
	if _, err := cs.RbacV1().Roles(ns).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name}, Subjects: []rbacv1.Subject{subject},
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name}}
	if _, err := cs.RbacV1().RoleBindings(ns).Create(ctx, rb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func testLogger(t *testing.T) *log.Logger {
	l := log.New(testWriter{t})
	l.SetLevel(log.DebugLevel)
	return l
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) { w.t.Log(string(p)); return len(p), nil }
