package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes/fake"
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

// A Tailscale Service moves onto a replica whose previous process the
// client talked to, and which restarted since (same node key from the
// state Secret, new disco key): the client's first connection to the
// service's address succeeds at once, instead of waiting out WireGuard's
// 5 s handshake retry, because the new process pinged the peers the old
// one recorded in recent_peers before it reported ready. Once after a
// graceful stop (the list written at stop too) and once as after a
// SIGKILL (only the periodic record lands).
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
	mu     sync.Mutex
	frozen bool
}

func (f *frozenPeers) SetRecentPeers(ctx context.Context, peers []string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.frozen {
		return nil
	}
	return f.PeerMemory.SetRecentPeers(ctx, peers)
}

func (f *frozenPeers) freeze() { f.mu.Lock(); f.frozen = true; f.mu.Unlock() }

func testRestartReached(t *testing.T, killed bool) {
	tn := tailnettest.New(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tcpHalfCloseServer(t, ln)
	svc := config.Service{Name: "svc:db", L4: &config.L4{Ports: []config.PortMap{{Port: 5432, Target: ln.Addr().String()}}}}
	group := func(host string) *config.Config {
		c := newConfig(tn, host, config.RoleIngressGroup)
		c.Group = &config.Group{Services: []config.Service{svc}}
		return c
	}
	// pg-0's state Secret, in client-go's fake clientset: kubestate's
	// layout without an API server.
	ctx := context.Background()
	const ns, secret = "proxy", "pg-0"
	cs := fake.NewSimpleClientset()
	options := func() Options {
		st, err := kubestate.New(ctx, cs, ns, secret)
		if err != nil {
			t.Fatal(err)
		}
		return Options{State: st, Status: st, Peers: st, PeerRecordInterval: 200 * time.Millisecond,
			DrainTimeout: 2 * time.Second, NoPriming: os.Getenv(noPrimingEnv) != ""}
	}
	addrs := vipAddrs(1)
	vip := netip.AddrPortFrom(addrs[0], 5432)

	opts := options()
	peers := &frozenPeers{PeerMemory: opts.Peers}
	opts.Peers = peers
	a := start(t, tn, group("pg-0"), opts)
	client := a.client
	clientIP, _ := client.TailscaleIPs()
	b := startEngine(t, tn, group("pg-1"), Options{})
	testpoll.UntilTrue(t, 60*time.Second, "pg-1 logged in", func() bool { return b.engine.loggedIn.Load() && b.engine.active.Load() })
	// route makes both replicas hosts of svc:db and routes its addresses
	// to one, as control does for the service's primary host.
	route := func(to *running) {
		for _, r := range []*running{a, b} {
			hostServices(t, tn, r.engine.Node(), map[string][]netip.Addr{"svc:db": addrs})
			if r != to {
				tn.Control.SetSubnetRoutes(nodeKey(t, r.engine.Node()), nil)
			}
		}
	}
	route(a)
	testpoll.Until(t, 30*time.Second, "svc:db through pg-0", func() error { return tcpOverTailnet(client, vip, 5*time.Second) })
	testpoll.Until(t, 20*time.Second, "the client in pg-0's recent_peers", func() error {
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
	route(b)
	testpoll.Until(t, 30*time.Second, "svc:db through pg-1", func() error { return tcpOverTailnet(client, vip, 5*time.Second) })

	// pg-0 restarts while pg-1 serves; control routes svc:db back to it
	// once it is ready, as when pg-1 goes next in a rolling restart.
	stopped := time.Now()
	a.cancel()
	select {
	case <-a.done:
	case <-time.After(30 * time.Second):
		t.Fatal("pg-0's first process did not stop")
	}
	a = startEngine(t, tn, group("pg-0"), options())
	testpoll.UntilTrue(t, 60*time.Second, "pg-0 logged in again", func() bool { return a.engine.loggedIn.Load() && a.engine.active.Load() })
	hostServices(t, tn, a.engine.Node(), map[string][]netip.Addr{"svc:db": addrs})
	tn.Control.SetSubnetRoutes(nodeKey(t, a.engine.Node()), nil)
	testpoll.UntilTrue(t, 60*time.Second, "pg-0 ready again", a.engine.Ready)
	ready := time.Now()
	route(a)
	aIP, _ := a.engine.Node().TailscaleIPs()
	testpoll.Until(t, 20*time.Second, "the client routes svc:db to pg-0", func() error {
		ps, err := peerOf(client, aIP)
		if err != nil {
			return err
		}
		if ps.PrimaryRoutes == nil || ps.PrimaryRoutes.Len() == 0 {
			return errors.New("not yet")
		}
		return nil
	})
	moved := time.Now()
	err = tcpOverTailnet(client, vip, 20*time.Second)
	took := time.Since(moved)
	t.Logf("pg-0 restarted (killed=%v, priming=%v): ready %v after the stop; svc:db moved onto it %v after ready; first connection took %v",
		killed, os.Getenv(noPrimingEnv) == "", ready.Sub(stopped).Round(time.Millisecond), moved.Sub(ready).Round(time.Millisecond), took.Round(time.Millisecond))
	if err != nil {
		t.Fatalf("first connection through the restarted replica: %v", err)
	}
	if took > 2*time.Second {
		t.Fatalf("first connection through the restarted replica took %v, want under 2s (WireGuard retries a handshake after 5s)", took)
	}
}

// peerOf is node's view of the peer with tailnet address ip.
func peerOf(node *tsnet.Server, ip netip.Addr) (*ipnstate.PeerStatus, error) {
	lc, err := node.LocalClient()
	if err != nil {
		return nil, err
	}
	st, err := lc.Status(context.Background())
	if err != nil {
		return nil, err
	}
	for _, ps := range st.Peer {
		if slices.Contains(ps.TailscaleIPs, ip) {
			return ps, nil
		}
	}
	return nil, fmt.Errorf("no peer %s", ip)
}
