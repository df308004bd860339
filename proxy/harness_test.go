package proxy

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/charmbracelet/log"
	"tailscale.com/ipn/store/mem"
	"tailscale.com/tsnet"

	"github.com/tailplane/tailplane/internal/tailnettest"
	"github.com/tailplane/tailplane/internal/testcert"
	"github.com/tailplane/tailplane/internal/testenv"
	"github.com/tailplane/tailplane/internal/testpoll"
	"github.com/tailplane/tailplane/proxy/config"
	"github.com/tailplane/tailplane/proxy/configwatch"
)

var env = testenv.New()

func TestMain(m *testing.M) { os.Exit(env.Run(m)) }

// running is one proxy engine on a test tailnet, with a client node.
type running struct {
	tn      *tailnettest.Tailnet
	engine  *Engine
	client  *tsnet.Server
	cancel  context.CancelFunc
	done    chan struct{} // closed when Run returned
	runErr  error
	cfgPath string // config file (file source only)
}

// start runs an engine with opts completed for the tailnet (when
// opts.Source is nil it uses a config file holding cfg), waits until it is
// logged in with the config applied and starts a client node. (Ready
// would also wait, in a group role, for control to route the replica's
// services to it, which tests do by hand: hostServices.)
func start(t *testing.T, tn *tailnettest.Tailnet, cfg *config.Config, opts Options) *running {
	t.Helper()
	r := startEngine(t, tn, cfg, opts)
	e := r.engine
	testpoll.Until(t, 60*time.Second, "proxy logged in with its config applied", func() error {
		if !e.loggedIn.Load() || !e.active.Load() {
			return fmt.Errorf("not ready")
		}
		return nil
	})
	wctx, wcancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer wcancel()
	if err := tailnettest.WaitDERP(wctx, e.Node()); err != nil {
		t.Fatal(err)
	}
	r.client = tn.Node(t, "client")
	return r
}

// startEngine runs the engine without waiting for it.
func startEngine(t *testing.T, tn *tailnettest.Tailnet, cfg *config.Config, opts Options) *running {
	t.Helper()
	r := &running{tn: tn, done: make(chan struct{})}
	if opts.Source == nil {
		r.cfgPath = filepath.Join(t.TempDir(), "proxy-config.json")
		writeConfig(t, r.cfgPath, cfg)
		opts.Source = &configwatch.File{Path: r.cfgPath, Interval: 50 * time.Millisecond, Log: testLogger(t)}
	}
	if opts.State == nil {
		opts.State = new(mem.Store)
		opts.Ephemeral = true // tsnet allows the memory store for ephemeral nodes only
	}
	opts.StateDir = t.TempDir()
	if opts.Logger == nil {
		opts.Logger = testLogger(t)
	}
	if opts.EgressHost == "" {
		opts.EgressHost = "127.0.0.1"
	}
	e, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	r.engine = e
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	go func() { r.runErr = e.Run(ctx); close(r.done) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-r.done:
		case <-time.After(30 * time.Second):
			t.Error("engine did not stop within 30s")
		}
	})
	return r
}

// newConfig returns a config skeleton for the tailnet.
func newConfig(tn *tailnettest.Tailnet, hostname string, role config.Role) *config.Config {
	return &config.Config{Version: config.Version, Hostname: hostname, Role: role, LoginServer: tn.ControlURL, AuthKey: tn.AuthKey}
}

func writeConfig(t *testing.T, path string, cfg *config.Config) {
	t.Helper()
	b, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// proxyAddr is the proxy's tailnet IPv4 with port.
func (r *running) proxyAddr(port int) string {
	ip4, _ := r.engine.Node().TailscaleIPs()
	return net.JoinHostPort(ip4.String(), fmt.Sprint(port))
}

// httpsClient talks HTTPS (HTTP/2 when offered) to the proxy's port 443
// over the tailnet, whatever host the URL names.
func (r *running) httpsClient(roots *x509.CertPool) *http.Client {
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return r.client.Dial(ctx, "tcp", r.proxyAddr(443))
		},
		TLSClientConfig:   &tls.Config{RootCAs: roots},
		ForceAttemptHTTP2: true,
	}
	return &http.Client{Transport: tr, Timeout: 20 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// plainClient talks HTTP to the proxy's port 80 over the tailnet.
func (r *running) plainClient() *http.Client {
	tr := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return r.client.Dial(ctx, "tcp", r.proxyAddr(80))
	}}
	return &http.Client{Transport: tr, Timeout: 20 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

func testLogger(t *testing.T) *log.Logger {
	return log.NewWithOptions(testWriter{t}, log.Options{Level: log.InfoLevel, Prefix: "proxy"})
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) { w.t.Log(string(p)); return len(p), nil }

// echoBackend answers with its name and the request headers it saw.
func echoBackend(t *testing.T, name string) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Backend", name)
		_ = json.NewEncoder(w).Encode(map[string]any{"backend": name, "method": r.Method, "path": r.URL.Path, "query": r.URL.RawQuery, "host": r.Host, "header": r.Header})
	}))
	t.Cleanup(srv.Close)
	return srv
}

type echoed struct {
	Backend string      `json:"backend"`
	Method  string      `json:"method"`
	Path    string      `json:"path"`
	Query   string      `json:"query"`
	Host    string      `json:"host"`
	Header  http.Header `json:"header"`
}

func get(c *http.Client, url string, hdr http.Header) (*http.Response, []byte, error) {
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		return nil, nil, err
	}
	for k, v := range hdr {
		req.Header[k] = v
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp, body, err
}

// testCert is a CA and a serving certificate for names.
type testCert struct {
	roots   *x509.CertPool
	certPEM []byte
	keyPEM  []byte
}

func newTestCert(t *testing.T, names ...string) *testCert {
	t.Helper()
	ca := testcert.NewCA(t)
	leaf := ca.Issue(t, 2, time.Now().Add(24*time.Hour), names...)
	return &testCert{roots: ca.Roots, certPEM: leaf.CertPEM, keyPEM: leaf.KeyPEM}
}

// files writes the key pair and returns a files-mode TLS section.
func (c *testCert) files(t *testing.T) config.TLS {
	dir := t.TempDir()
	cf, kf := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	if err := os.WriteFile(cf, c.certPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(kf, c.keyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	return config.TLS{Mode: config.TLSFiles, CertFile: cf, KeyFile: kf}
}

func backendOf(name string, srv *httptest.Server) config.Backend {
	return config.Backend{Service: name, Address: srv.Listener.Addr().String()}
}
