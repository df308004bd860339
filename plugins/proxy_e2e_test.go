package plugins_test

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
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/log"
	"tailscale.com/ipn/store/mem"

	"github.com/tailplane/tailplane/internal/tailnettest"
	"github.com/tailplane/tailplane/internal/testpoll"
	"github.com/tailplane/tailplane/plugins"
	"github.com/tailplane/tailplane/plugins/host"
	"github.com/tailplane/tailplane/plugins/internal/wasmbuild"
	"github.com/tailplane/tailplane/plugins/sdk/abi"
	"github.com/tailplane/tailplane/proxy"
	"github.com/tailplane/tailplane/proxy/config"
	"github.com/tailplane/tailplane/proxy/configwatch"
	"github.com/tailplane/tailplane/proxy/route"
)

// The Manager as the real tailplane-proxy's extra router, on a real
// tailnet: a redirect plugin, an identity plugin and a Funnel plugin run in
// order on tailnet requests and on public-listener requests, and a hot
// reload changes behaviour while the proxy runs.
func TestPluginsInTheTsnetProxy(t *testing.T) {
	tn := tailnettest.New(t)
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "backend:"+r.URL.Path)
	}))
	defer backend.Close()

	m := newManager(t)
	spec := func(name, pkg, cfg string, order int, caps ...abi.Capability) plugins.Spec {
		return plugins.Spec{Order: order, Config: host.Config{Name: name, Module: wasmbuild.Go(t, pkg), PluginConfig: []byte(cfg),
			Capabilities: caps, Timeout: 10 * time.Second}}
	}
	specs := []plugins.Spec{
		spec("funnel", "./plugins/examples/funnel", `{"publicPaths":["/public/"]}`, 30, abi.CapFunnel),
		spec("redirect", "./plugins/examples/redirect", `{"rules":[{"match":"^/old/(.*)$","to":"/new/$1","status":308}]}`, 10),
		spec("identity", "./plugins/examples/identity", `{"rules":[{"path":"/admin/","logins":["nobody@example.com"]}]}`, 20, abi.CapIdentity),
	}
	mustLoad(t, m.Apply(context.Background(), specs))

	dir := t.TempDir()
	certFile, keyFile, roots := selfSigned(t, dir, "pub.example.com")
	pub, _ := net.Listen("tcp", "127.0.0.1:0")
	pubAddr := pub.Addr().String()
	_ = pub.Close()
	cfg := &config.Config{Version: config.Version, Hostname: "plugin-proxy", Role: config.RoleIngressL7, LoginServer: tn.ControlURL,
		L7: &config.L7{PlainHTTP: true, Funnel: true, TLS: config.TLS{Mode: config.TLSFiles, CertFile: certFile, KeyFile: keyFile},
			DefaultBackend: &config.Backend{Service: "web", Address: backend.Listener.Addr().String()}}}
	raw, _ := json.Marshal(cfg)
	if err := os.WriteFile(filepath.Join(dir, "config.json"), raw, 0o600); err != nil {
		t.Fatal(err)
	}
	quiet := log.NewWithOptions(io.Discard, log.Options{})
	e, err := proxy.New(proxy.Options{
		Source: &configwatch.File{Path: filepath.Join(dir, "config.json"), Interval: 50 * time.Millisecond, Log: quiet},
		State:  new(mem.Store), Ephemeral: true, StateDir: filepath.Join(dir, "state"), EgressHost: "127.0.0.1",
		PublicAddr: pubAddr, ExtraRouters: []route.Router{m}, Logger: quiet,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = e.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	testpoll.UntilTrue(t, 60*time.Second, "proxy ready", func() bool { return e.Ready() })
	wctx, wcancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer wcancel()
	if err := tailnettest.WaitDERP(wctx, e.Node()); err != nil {
		t.Fatal(err)
	}
	client := tn.Node(t, "plugin-client")
	ip4, _ := e.Node().TailscaleIPs()
	noRedirect := func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	tailnet := &http.Client{Timeout: 10 * time.Second, CheckRedirect: noRedirect, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return client.Dial(ctx, "tcp", net.JoinHostPort(ip4.String(), "80"))
		}}}
	public := &http.Client{Timeout: 10 * time.Second, CheckRedirect: noRedirect, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "tcp", pubAddr)
		},
		TLSClientConfig: &tls.Config{RootCAs: roots}}}

	type want struct {
		status   int
		location string
		body     string
	}
	check := func(c *http.Client, url string, w want) {
		t.Helper()
		var resp *http.Response
		var body []byte
		testpoll.UntilTrue(t, 30*time.Second, "GET "+url, func() bool {
			r, err := c.Get(url)
			if err != nil {
				return false
			}
			body, _ = io.ReadAll(r.Body)
			_ = r.Body.Close()
			resp = r
			return true
		})
		if resp.StatusCode != w.status || resp.Header.Get("Location") != w.location || (w.body != "" && strings.TrimSpace(string(body)) != w.body) {
			t.Errorf("GET %s: %d Location=%q %q; want %d %q %q", url, resp.StatusCode, resp.Header.Get("Location"), body, w.status, w.location, w.body)
		}
	}
	check(tailnet, "http://plugin-proxy/home", want{200, "", "backend:/home"})
	check(tailnet, "http://plugin-proxy/old/a", want{308, "/new/a", ""})
	check(tailnet, "http://plugin-proxy/admin/x", want{403, "", "forbidden"})
	check(public, "https://pub.example.com/public/a", want{200, "", "backend:/public/a"})
	check(public, "https://pub.example.com/home", want{403, "", ""})
	check(public, "https://pub.example.com/admin/x", want{403, "", ""})

	// Hot reload while the proxy runs: the redirect rule changes.
	specs[1] = spec("redirect", "./plugins/examples/redirect", `{"rules":[{"match":"^/old/(.*)$","to":"/v2/$1","status":301}]}`, 10)
	mustLoad(t, m.Apply(context.Background(), specs))
	check(tailnet, "http://plugin-proxy/old/a", want{301, "/v2/a", ""})
}

// selfSigned writes a self-signed certificate for host and returns its
// files and a pool trusting it.
func selfSigned(t *testing.T, dir, host string) (certFile, keyFile string, roots *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: host}, DNSNames: []string{host},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600); err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	roots = x509.NewCertPool()
	roots.AddCert(cert)
	return certFile, keyFile, roots
}
