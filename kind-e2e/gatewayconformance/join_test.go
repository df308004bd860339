//go:build conformance

package gatewayconformance

import (
	"bufio"
	"bytes"
	"context"
	"net/url"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	tsapi "tailscale.com/client/tailscale/v2"
	"tailscale.com/ipn/store/mem"
	"tailscale.com/net/netns"
	"tailscale.com/tsnet"
)

// joinTailnet joins devcluster's tailnet with an ephemeral tsnet node, as
// the operator suite's clients do: an auth key minted through the tailnet's
// API with devcluster's OAuth client. The Gateways' addresses are tailnet
// addresses, which only a tailnet node reaches.
func joinTailnet(ctx context.Context, t *testing.T, c *cluster) *tsnet.Server {
	t.Helper()
	env, err := c.env()
	if err != nil {
		t.Fatal(err)
	}
	base, err := url.Parse(env["TS_API_URL"])
	if err != nil {
		t.Fatalf("TS_API_URL: %v", err)
	}
	api := &tsapi.Client{BaseURL: base, Tailnet: "-", Auth: &tsapi.OAuth{ClientID: env["TS_API_CLIENT_ID"], ClientSecret: env["TS_API_CLIENT_SECRET"]}}
	var req tsapi.CreateKeyRequest
	req.Description, req.ExpirySeconds = "gateway conformance client", 3600
	req.Capabilities.Devices.Create.Ephemeral = true
	req.Capabilities.Devices.Create.Preauthorized = true
	key, err := api.Keys().CreateAuthKey(ctx, req)
	if err != nil {
		t.Fatalf("mint an auth key: %v", err)
	}
	// devcluster's tailnet is on this host's addresses: no socket marks.
	netns.SetEnabled(false)
	node := &tsnet.Server{
		ControlURL: env["TS_CONTROL_URL"], Hostname: "gateway-conformance", AuthKey: key.Key, Ephemeral: true,
		Store: new(mem.Store), Dir: t.TempDir(), Logf: func(string, ...any) {}, UserLogf: t.Logf,
	}
	upCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if _, err := node.Up(upCtx); err != nil {
		t.Fatalf("join devcluster's tailnet: %v", err)
	}
	t.Cleanup(func() { closeWithin(t, node, 30*time.Second) })
	return node
}

// closeWithin closes node, waiting at most d. tsnet v1.102.5's Close can
// block for good after a run with many connections: its netstack aborts
// each open connection, and the RST of one waits on an outbound queue that
// nothing drains any more (seen in CI after the suite's 10,000-odd
// requests). The process's exit takes the node with it.
func closeWithin(t *testing.T, node *tsnet.Server, d time.Duration) {
	closed := make(chan struct{})
	go func() {
		_ = node.Close()
		close(closed)
	}()
	select {
	case <-closed:
	case <-time.After(d):
		t.Logf("the tsnet node did not close within %s (tsnet's netstack blocked on its outbound queue); the process's exit ends it", d)
	}
}

// hostTUN is the TUN device of the host's tailnet node.
const hostTUN = "tpconf0"

// joinHost makes this host a tailnet node with kernel networking (devcluster
// join --tun), as the machine of a user who runs the suite would be: the
// suite's TLS helper for "connection rejected" checks dials Gateway
// addresses with the host's own network (utils/tls.
// MakeTLSConnectionAndExpectEventuallyConnectionRejection takes no dialer),
// which only reaches tailnet addresses through a TUN device. Its node leaves
// when the test ends.
func joinHost(ctx context.Context, t *testing.T, c *cluster, assets string) {
	t.Helper()
	join := exec.Command(c.devcluster, "join", "--dir", c.dir, "--tun", hostTUN, "--hostname", "gateway-conformance-host",
		"--tailscaled", filepath.Join(assets, "tailscaled"), "--tailscale", filepath.Join(assets, "tailscale"))
	join.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var log bytes.Buffer
	join.Stderr = &log
	stdout, err := join.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := join.Start(); err != nil {
		t.Fatalf("devcluster join --tun: %v", err)
	}
	exited := make(chan struct{})
	ready := make(chan struct{})
	go func() {
		lines := bufio.NewScanner(stdout)
		for lines.Scan() {
			if strings.HasPrefix(lines.Text(), "ready tun=") {
				close(ready)
			}
		}
	}()
	go func() { _ = join.Wait(); close(exited) }()
	t.Cleanup(func() {
		// Ctrl-C: tailscaled goes, and with it the TUN device and routes.
		_ = syscall.Kill(-join.Process.Pid, syscall.SIGINT)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			_ = syscall.Kill(-join.Process.Pid, syscall.SIGKILL)
			<-exited
		}
	})
	select {
	case <-ready:
		t.Logf("this host joined the tailnet on TUN device %s", hostTUN)
	case <-exited:
		t.Fatalf("devcluster join --tun exited before joining: %s", log.String())
	case <-ctx.Done():
		t.Fatalf("devcluster join --tun: %v", ctx.Err())
	}
}
