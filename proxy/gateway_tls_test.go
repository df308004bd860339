package proxy

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tailplane/tailplane/internal/tailnettest"
	"github.com/tailplane/tailplane/internal/testpoll"
	"github.com/tailplane/tailplane/proxy/config"
	"github.com/tailplane/tailplane/proxy/l7"
)

// tlsNameServer accepts TLS with cert and writes name on every connection:
// a passthrough backend the client can only reach through an untouched
// handshake.
func tlsNameServer(t *testing.T, cert *testCert, name string) config.Backend {
	t.Helper()
	pair, err := tls.X509KeyPair(cert.certPEM, cert.keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{pair}})
	if err != nil {
		t.Fatal(err)
	}
	serveConns(t, ln, func(c net.Conn) { io.WriteString(c, name) })
	return config.Backend{Service: name, Address: ln.Addr().String()}
}

// tlsSecret stores cert as the kubernetes.io/tls Secret name in ns.
func tlsSecret(t *testing.T, ns, name string, cert *testCert) {
	t.Helper()
	_, err := env.Clientset(t).CoreV1().Secrets(ns).Create(context.Background(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name},
		Type: corev1.SecretTypeTLS, Data: map[string][]byte{corev1.TLSCertKey: cert.certPEM, corev1.TLSPrivateKeyKey: cert.keyPEM}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
}

// A gateway's HTTPS listeners sharing port 443 serve each its own Secret's
// certificate by SNI; a TLS listener passes the handshake through to the
// backend its SNI selects; TCP and UDP listeners sharing a port number
// relay to their backends; a renewed Secret serves without a reload; only
// the listener with Funnel serves the public side.
func TestGatewayTLSPassthroughTCP(t *testing.T) {
	ns := env.Namespace(t)
	tn := tailnettest.New(t, tailnettest.WithAuthKey("tskey-gwtls"))
	appCert, otherCert := newTestCert(t, "app.example.com"), newTestCert(t, "other.example.org")
	tlsSecret(t, ns, "app-tls", appCert)
	tlsSecret(t, ns, "other-tls", otherCert)
	dbCert, wildCert := newTestCert(t, "db.example.com"), newTestCert(t, "*.example.com")
	db, wild := tlsNameServer(t, dbCert, "db"), tlsNameServer(t, wildCert, "wild")
	tcpLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tcpHalfCloseServer(t, tcpLn)
	app, other := echoBackend(t, "app"), echoBackend(t, "other")

	cfg := newConfig(tn, "gw-tls", config.RoleGateway)
	cfg.Gateway = &config.Gateway{Listeners: []config.Listener{
		{Name: "app", Port: 443, Protocol: config.ListenerHTTPS, Hostname: "app.example.com", Funnel: true,
			TLS:        &config.TLS{Mode: config.TLSSecret, SecretName: "app-tls"},
			HTTPRoutes: []config.HTTPRoute{{Name: "ns/app/0", Backends: weighted(backendOf("app", app))}}},
		{Name: "other", Port: 443, Protocol: config.ListenerHTTPS, Hostname: "other.example.org",
			TLS:        &config.TLS{Mode: config.TLSSecret, SecretName: "other-tls"},
			HTTPRoutes: []config.HTTPRoute{{Name: "ns/other/0", Backends: weighted(backendOf("other", other))}}},
		{Name: "tls", Port: 8443, Protocol: config.ListenerTLS, TLSRoutes: []config.TLSRoute{
			{Name: "ns/db/0", Hostnames: []string{"db.example.com"}, Backends: weighted(db)},
			{Name: "ns/wild/0", Hostnames: []string{"*.example.com"}, Backends: weighted(wild)},
		}},
		{Name: "tcp", Port: 5432, Protocol: config.ListenerTCP, Backends: weighted(config.Backend{Service: "tcp", Address: tcpLn.Addr().String()})},
		{Name: "udp", Port: 5432, Protocol: config.ListenerUDP, Backends: weighted(config.Backend{Service: "udp", Address: udpEchoServer(t)})},
	}}
	pub, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	pubAddr := pub.Addr().String()
	pub.Close()
	r := start(t, tn, cfg, Options{Kube: env.Clientset(t), Namespace: ns, TLSRefreshInterval: 100 * time.Millisecond, PublicAddr: pubAddr})

	for _, tc := range []struct {
		host, backend string
		cert          *testCert
	}{{"app.example.com", "app", appCert}, {"other.example.org", "other", otherCert}} {
		var resp *http.Response
		testpoll.Until(t, 20*time.Second, "HTTPS to "+tc.host, func() (err error) {
			resp, _, err = get(r.httpsClient(tc.cert.roots), "https://"+tc.host+"/", nil)
			return err
		})
		if resp.Header.Get("X-Backend") != tc.backend || resp.ProtoMajor != 2 || resp.TLS.PeerCertificates[0].DNSNames[0] != tc.host {
			t.Errorf("https://%s/: backend %q over %s with a certificate for %v; want %s over HTTP/2 with the listener's certificate",
				tc.host, resp.Header.Get("X-Backend"), resp.Proto, resp.TLS.PeerCertificates[0].DNSNames, tc.backend)
		}
	}

	// Funnel (its public stand-in): the listener with Funnel serves
	// public requests, marked public and without identity; the other
	// listener on the port has no certificate there.
	public := func(roots *testCert) *http.Client {
		return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				return (&net.Dialer{}).DialContext(ctx, "tcp", pubAddr)
			},
			TLSClientConfig: &tls.Config{RootCAs: roots.roots}}}
	}
	var body []byte
	testpoll.Until(t, 20*time.Second, "public HTTPS to app.example.com", func() (err error) {
		_, body, err = get(public(appCert), "https://app.example.com/", http.Header{l7.HeaderUserLogin: {"spoof@x"}})
		return err
	})
	var e echoed
	if err := json.Unmarshal(body, &e); err != nil || e.Backend != "app" || e.Header.Get(l7.HeaderFunnelRequest) != "?1" || e.Header.Get(l7.HeaderUserLogin) != "" {
		t.Errorf("public request reached %q with headers %v (%v), want app, marked public, no identity", e.Backend, e.Header, err)
	}
	if _, _, err := get(public(otherCert), "https://other.example.org/", nil); err == nil {
		t.Error("the listener without Funnel answered a public request")
	}

	passthrough := func(sni string, roots *testCert) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		c, err := r.client.Dial(ctx, "tcp", r.proxyAddr(8443))
		if err != nil {
			return "", err
		}
		return readOverTLS(ctx, c, sni, roots.roots)
	}
	for sni, want := range map[string]string{"db.example.com": "db", "x.example.com": "wild"} {
		roots := map[string]*testCert{"db": dbCert, "wild": wildCert}[want]
		var got string
		testpoll.Until(t, 20*time.Second, "TLS passthrough for "+sni, func() (err error) { got, err = passthrough(sni, roots); return err })
		if got != want {
			t.Errorf("passthrough for SNI %s reached %q, want %q", sni, got, want)
		}
	}
	if got, err := passthrough("db.example.org", dbCert); err == nil {
		t.Errorf("SNI no route takes reached %q, want the connection closed", got)
	}

	testpoll.Until(t, 20*time.Second, "TCP listener relays", func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return pingEcho(ctx, r.client, r.proxyAddr(5432))
	})
	testpoll.Until(t, 20*time.Second, "UDP listener relays", func() error {
		c, err := r.client.Dial(context.Background(), "udp", r.proxyAddr(5432))
		if err != nil {
			return err
		}
		return udpPing(c)
	})

	// A renewed Secret serves without a new config.
	renewed := newTestCert(t, "app.example.com")
	sec, err := env.Clientset(t).CoreV1().Secrets(ns).Get(context.Background(), "app-tls", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sec.Data[corev1.TLSCertKey], sec.Data[corev1.TLSPrivateKeyKey] = renewed.certPEM, renewed.keyPEM
	if _, err := env.Clientset(t).CoreV1().Secrets(ns).Update(context.Background(), sec, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	testpoll.Until(t, 20*time.Second, "the renewed certificate serves", func() error {
		_, _, err := get(r.httpsClient(renewed.roots), "https://app.example.com/", nil)
		return err
	})
}
