package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"tailscale.com/tsnet"

	"github.com/tailplane/tailplane/internal/syncbuf"
	"github.com/tailplane/tailplane/internal/tailnettest"
	"github.com/tailplane/tailplane/internal/testpoll"
	"github.com/tailplane/tailplane/proxy/config"
)

// The real binary, configured from a file: it serves over the tailnet,
// refuses a bad config without exiting, and on SIGTERM stops accepting,
// finishes the in-flight request and exits 0.
func TestBinaryBadConfigAndSIGTERMDrain(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "tailplane-proxy")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	tn := tailnettest.New(t)
	started, release := make(chan struct{}, 1), make(chan struct{})
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			started <- struct{}{}
			<-release
		}
		io.WriteString(w, "ok")
	}))
	t.Cleanup(backend.Close)
	cfg := &config.Config{Version: config.Version, Hostname: "bin-proxy", LoginServer: tn.ControlURL, Role: config.RoleIngressL7,
		L7: &config.L7{PlainHTTP: true, DefaultBackend: &config.Backend{Service: "b", Address: backend.Listener.Addr().String()}}}
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "proxy-config.json")
	write := func(doc []byte) {
		if err := os.WriteFile(cfgPath+".tmp", doc, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(cfgPath+".tmp", cfgPath); err != nil {
			t.Fatal(err)
		}
	}
	doc, _ := json.Marshal(cfg)
	write(doc)

	var logs syncbuf.Buffer
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), "TAILPLANE_CONFIG_FILE="+cfgPath, "TAILPLANE_STATE_DIR="+filepath.Join(dir, "state"),
		"TAILPLANE_LOCAL_ADDR=127.0.0.1:0", "TAILPLANE_DRAIN_TIMEOUT=20s")
	exited := startProxy(t, cmd, &logs)

	client := tn.Node(t, "client")
	proxyIP := peerIP(t, client, "bin-proxy")
	hc := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return client.Dial(ctx, "tcp", net.JoinHostPort(proxyIP, "80"))
	}}}
	getBody := func(c *http.Client, path string) (string, error) {
		resp, err := c.Get("http://bin-proxy" + path)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			return "", fmt.Errorf("status %d %q", resp.StatusCode, b)
		}
		return string(b), err
	}
	testpoll.Until(t, 60*time.Second, "served through the binary", func() error { _, err := getBody(hc, "/"); return err })

	// A bad config is refused; the process keeps running and serving.
	write([]byte(`{"version":"v2","hostname":"bin-proxy"}`))
	testpoll.Until(t, 10*time.Second, "refusal logged", func() error {
		if !strings.Contains(logs.String(), `unknown config version \"v2\"`) {
			return fmt.Errorf("not logged yet")
		}
		return nil
	})
	if _, err := getBody(hc, "/"); err != nil {
		t.Fatalf("after a bad config: %v", err)
	}

	// SIGTERM with a request in flight.
	inflight := make(chan error, 1)
	go func() {
		body, err := getBody(hc, "/slow")
		if err == nil && body != "ok" {
			err = fmt.Errorf("body %q", body)
		}
		inflight <- err
	}()
	<-started
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	fresh := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return client.Dial(ctx, "tcp", net.JoinHostPort(proxyIP, "80"))
	}}}
	testpoll.Until(t, 10*time.Second, "new connections refused", func() error {
		if _, err := getBody(fresh, "/"); err == nil {
			return fmt.Errorf("still accepting")
		}
		return nil
	})
	select {
	case err := <-exited:
		t.Fatalf("exited before the in-flight request finished: %v", err)
	default:
	}
	close(release)
	if err := <-inflight; err != nil {
		t.Fatalf("in-flight request: %v", err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("exit: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("did not exit after draining")
	}
}

// startProxy starts the proxy binary's cmd with its output in logs, killed
// with the test (and with the test process), and returns its exit.
func startProxy(t *testing.T, cmd *exec.Cmd, logs *syncbuf.Buffer) <-chan error {
	t.Helper()
	cmd.Stdout, cmd.Stderr = logs, logs
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		t.Logf("proxy log:\n%s", logs.String())
	})
	return exited
}

// peerIP waits until client sees the peer named hostname and returns its
// first tailnet IP.
func peerIP(t *testing.T, client *tsnet.Server, hostname string) string {
	t.Helper()
	lc, err := client.LocalClient()
	if err != nil {
		t.Fatal(err)
	}
	var ip string
	testpoll.Until(t, 60*time.Second, "peer "+hostname, func() error {
		st, err := lc.Status(context.Background())
		if err != nil {
			return err
		}
		for _, p := range st.Peer {
			if p.HostName == hostname && len(p.TailscaleIPs) > 0 {
				ip = p.TailscaleIPs[0].String()
				return nil
			}
		}
		return fmt.Errorf("not seen yet")
	})
	return ip
}
