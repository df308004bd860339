// Package tailnettest runs a real, in-process tailnet on 127.0.0.1 for tests
// and benchmarks: tailscale's testcontrol control server, a DERP relay and a
// STUN server, plus helpers that start tsnet nodes on it with in-memory
// state.
//
// It imports tailscale.com (tsnet, testcontrol, the integration DERP helper)
// and the standard library; product code never imports it.
package tailnettest

import (
	"context"
	"fmt"
	"net/http/httptest"
	"testing"
	"time"

	"tailscale.com/ipn/store/mem"
	"tailscale.com/net/netns"
	"tailscale.com/tailcfg"
	"tailscale.com/tsnet"
	"tailscale.com/tstest/integration"
	"tailscale.com/tstest/integration/testcontrol"
	"tailscale.com/types/logger"
)

// MagicDNSDomain is the tailnet's DNS suffix; node FQDNs are
// <hostname>.<MagicDNSDomain>.
const MagicDNSDomain = "tail-test.ts.net"

// Tailnet is one control server with its DERP and STUN servers.
type Tailnet struct {
	// Control is the control server; tests may set its hooks.
	Control *testcontrol.Server
	// ControlURL is what nodes use as ControlURL / loginServer.
	ControlURL string
	// AuthKey is the key every node must present ("" when not required).
	AuthKey   string
	verbose   bool
	tagOwners map[string][]string
}

// Option changes how New builds the tailnet.
type Option func(*Tailnet)

// WithAuthKey makes control refuse nodes that do not log in with key.
func WithAuthKey(key string) Option { return func(tn *Tailnet) { tn.AuthKey = key } }

// WithTagOwners turns on control's tag model: a node gets the tags it
// advertises (tsnet's AdvertiseTags) when owners lists each of them.
func WithTagOwners(owners map[string][]string) Option {
	return func(tn *Tailnet) { tn.tagOwners = owners }
}

// WithVerbose sends control and node logs to t.Logf.
func WithVerbose() Option { return func(tn *Tailnet) { tn.verbose = true } }

// New starts a tailnet that lives until the test ends. Tag requests are
// allowed for any tag owned by any user ("tag:test" and "tag:k8s").
func New(t testing.TB, opts ...Option) *Tailnet {
	t.Helper()
	// Loopback-only nodes must not try to bind to interfaces.
	netns.SetEnabled(false)
	tn := &Tailnet{}
	for _, o := range opts {
		o(tn)
	}
	derpMap := integration.RunDERPAndSTUN(t, logger.Discard, "127.0.0.1")
	tn.Control = &testcontrol.Server{
		DERPMap:        derpMap,
		DNSConfig:      &tailcfg.DNSConfig{Proxied: true},
		MagicDNSDomain: MagicDNSDomain,
		RequireAuthKey: tn.AuthKey,
		TagOwners:      tn.tagOwners,
		Logf:           tn.logf(t),
	}
	tn.Control.HoldMapRequest = tn.followHostname
	srv := httptest.NewUnstartedServer(tn.Control)
	srv.Start()
	t.Cleanup(srv.Close)
	tn.ControlURL = srv.URL
	return tn
}

// followHostname makes a device's MagicDNS name follow its hostname, as
// Tailscale's control server does for a machine whose name was not set by
// hand: when a node reports a new hostname, its name (and so its MagicDNS
// name) changes, and every peer learns it. testcontrol keeps the name given
// at registration; this runs after each map request it handled.
func (tn *Tailnet) followHostname(req *tailcfg.MapRequest) (done func()) {
	if req.Hostinfo == nil || req.Hostinfo.Hostname == "" {
		return nil
	}
	return func() {
		n := tn.Control.Node(req.NodeKey)
		if n == nil || !n.Hostinfo.Valid() || n.Hostinfo.Hostname() == "" {
			return
		}
		want := n.Hostinfo.Hostname() + "." + MagicDNSDomain + "."
		if n.Name == want {
			return
		}
		// n is a copy: a concurrent update of the node between Node and
		// UpdateNode is lost, and resent by the node's next map request.
		n.Name = want
		tn.Control.UpdateNode(n)
	}
}

func (tn *Tailnet) logf(t testing.TB) logger.Logf {
	if tn.verbose {
		return t.Logf
	}
	return logger.Discard
}

// Server returns an unstarted tsnet node configured for this tailnet, with
// in-memory state and the tailnet's auth key. It is closed when the test ends.
func (tn *Tailnet) Server(t testing.TB, hostname string) *tsnet.Server {
	t.Helper()
	s := &tsnet.Server{
		Dir:        t.TempDir(),
		Hostname:   hostname,
		ControlURL: tn.ControlURL,
		AuthKey:    tn.AuthKey,
		Store:      new(mem.Store),
		Ephemeral:  true,
		Logf:       tn.logf(t),
		UserLogf:   tn.logf(t),
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// Node starts a tsnet node, waits until it is logged in and connected to its
// home DERP (so the first packet to it is not lost), and returns it.
func (tn *Tailnet) Node(t testing.TB, hostname string) *tsnet.Server {
	t.Helper()
	s := tn.Server(t, hostname)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := s.Up(ctx); err != nil {
		t.Fatalf("tailnettest: node %s: %v", hostname, err)
	}
	if err := WaitDERP(ctx, s); err != nil {
		t.Fatalf("tailnettest: node %s: %v", hostname, err)
	}
	return s
}

// WaitDERP blocks until s has received from its home DERP region.
func WaitDERP(ctx context.Context, s *tsnet.Server) error {
	h := s.Sys().HealthTracker.Get()
	ms := s.Sys().MagicSock.Get()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		if r := ms.GetLastNetcheckReport(ctx); r != nil && r.PreferredDERP != 0 &&
			!h.GetDERPRegionReceivedTime(r.PreferredDERP).IsZero() {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("home DERP not connected: %w", ctx.Err())
		case <-tick.C:
		}
	}
}

// FQDN returns hostname's MagicDNS name (without the trailing dot).
func FQDN(hostname string) string { return hostname + "." + MagicDNSDomain }
