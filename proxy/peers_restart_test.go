package proxy

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"tailscale.com/ipn/ipnstate"
	"tailscale.com/tsnet"

	"github.com/tailplane/tailplane/internal/kubestate"
	"github.com/tailplane/tailplane/internal/proxystate"
	"github.com/tailplane/tailplane/internal/tailnettest"
	"github.com/tailplane/tailplane/internal/testpoll"
	"github.com/tailplane/tailplane/proxy/config"
)

// noPrimingEnv, set to anything, runs TestRestartedProxyReachedAtOnce
// with the pings at start turned off (Options.NoPriming), to measure what
// they save; the test then fails.
const noPrimingEnv = "TAILPLANE_TEST_NO_PRIMING"

// A client that talked to a proxy over a direct path reaches the proxy's
// next process (same node key from the state Secret, new disco key) as
// soon as that process reports ready, instead of waiting out WireGuard's
// 5 s handshake retry: the new process pinged the peers the old one
// recorded in recent_peers. Once after a graceful stop (the list written
// at stop) and once as after a SIGKILL (only the periodic record lands).
func TestRestartedProxyReachedAtOnce(t *testing.T) {
	for _, killed := range []bool{false, true} {
		name := "stopped"
		if killed {
			name = "killed"
		}
		t.Run(name, func(t *testing.T) { testRestartReached(t, killed) })
	}
}

// frozenPeers passes writes to a PeerMemory until frozen: what a killed
// process leaves is its last periodic record.
type frozenPeers struct {
	PeerMemory
	mu      sync.Mutex
	frozen  bool
	dropped int
}

func (f *frozenPeers) SetRecentPeers(ctx context.Context, peers []string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.frozen {
		f.dropped++
		return nil
	}
	return f.PeerMemory.SetRecentPeers(ctx, peers)
}

func (f *frozenPeers) freeze() { f.mu.Lock(); f.frozen = true; f.mu.Unlock() }

func testRestartReached(t *testing.T, killed bool) {
	ns, cs := env.Namespace(t), env.Clientset(t)
	ctx := context.Background()
	tn := tailnettest.New(t)
	web := echoBackend(t, "web")
	cfg := newConfig(tn, "prime-proxy", config.RoleIngressL4)
	cfg.L4 = &config.L4{Ports: []config.PortMap{{Port: 80, Target: web.Listener.Addr().String()}}}
	const secret = "prime-proxy-0"
	options := func() (Options, *kubestate.Store) {
		st, err := kubestate.New(ctx, cs, ns, secret)
		if err != nil {
			t.Fatal(err)
		}
		return Options{State: st, Status: st, Peers: st, PeerRecordInterval: 200 * time.Millisecond,
			DrainTimeout: 2 * time.Second, NoPriming: os.Getenv(noPrimingEnv) != ""}, st
	}

	opts, _ := options()
	peers := &frozenPeers{PeerMemory: opts.Peers}
	opts.Peers = peers
	r1 := start(t, tn, cfg, opts)
	client := r1.client
	clientIP, _ := client.TailscaleIPs()
	proxyIP, _ := r1.engine.Node().TailscaleIPs()
	testpoll.Until(t, 30*time.Second, "a request through the proxy", func() error { return fetchOnce(client, r1.proxyAddr(80), 5*time.Second) })
	testpoll.Until(t, 30*time.Second, "the client on a direct path to the proxy", func() error {
		if err := fetchOnce(client, r1.proxyAddr(80), 5*time.Second); err != nil {
			return err
		}
		ps, err := peerOf(client, proxyIP.String())
		if err != nil {
			return err
		}
		if ps.CurAddr == "" {
			return fmt.Errorf("through DERP region %q", ps.Relay)
		}
		return nil
	})
	testpoll.Until(t, 20*time.Second, "the client in recent_peers", func() error {
		v, _ := stateKey(t, cs, ns, secret, proxystate.KeyRecentPeers)
		var list []string
		if err := json.Unmarshal([]byte(v), &list); err != nil || !slices.Contains(list, clientIP.String()) {
			return fmt.Errorf("%s = %q", proxystate.KeyRecentPeers, v)
		}
		return nil
	})
	if killed {
		peers.freeze()
	}
	// Traffic right before the stop, as a client of a serving replica has.
	if err := fetchOnce(client, r1.proxyAddr(80), 5*time.Second); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	r1.cancel()
	select {
	case <-r1.done:
	case <-time.After(30 * time.Second):
		t.Fatal("the first process did not stop")
	}

	opts, _ = options()
	r2 := startEngine(t, tn, cfg, opts)
	testpoll.UntilTrue(t, 60*time.Second, "the next process ready", r2.engine.Ready)
	ready := time.Now()
	if got, _ := r2.engine.Node().TailscaleIPs(); got != proxyIP {
		t.Fatalf("the next process is %v, want the same device %v", got, proxyIP)
	}
	err := fetchOnce(client, r2.proxyAddr(80), 20*time.Second)
	took := time.Since(ready)
	t.Logf("restart (killed=%v, priming=%v): ready %v after the stop; first request took %v after ready",
		killed, !opts.NoPriming, ready.Sub(stopped).Round(time.Millisecond), took.Round(time.Millisecond))
	if killed && peers.dropped == 0 {
		t.Error("the first process's record at stop was not dropped; the killed case did not happen")
	}
	if err != nil {
		t.Fatalf("first request to the next process: %v", err)
	}
	if took > 2*time.Second {
		t.Fatalf("first request to the restarted proxy took %v, want under 2s (WireGuard retries a handshake after 5s)", took)
	}
}

// fetchOnce makes one HTTP request on a new connection from client to addr
// over the tailnet.
func fetchOnce(client *tsnet.Server, addr string, timeout time.Duration) error {
	tr := &http.Transport{DisableKeepAlives: true, DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return client.Dial(ctx, "tcp", addr)
	}}
	defer tr.CloseIdleConnections()
	resp, _, err := get(&http.Client{Transport: tr, Timeout: timeout}, "http://app.example.com/", nil)
	if err != nil {
		return err
	}
	if resp.Header.Get("X-Backend") != "web" {
		return fmt.Errorf("status %d from backend %q", resp.StatusCode, resp.Header.Get("X-Backend"))
	}
	return nil
}

// peerOf is node's view of the peer with tailnet address ip.
func peerOf(node *tsnet.Server, ip string) (*ipnstate.PeerStatus, error) {
	lc, err := node.LocalClient()
	if err != nil {
		return nil, err
	}
	st, err := lc.Status(context.Background())
	if err != nil {
		return nil, err
	}
	for _, ps := range st.Peer {
		for _, a := range ps.TailscaleIPs {
			if a.String() == ip {
				return ps, nil
			}
		}
	}
	return nil, fmt.Errorf("no peer %s", ip)
}
