package proxy

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"

	"tailscale.com/ipn"
	"tailscale.com/net/tsaddr"
	"tailscale.com/tsnet"
	"tailscale.com/types/nettype"
	"tailscale.com/wgengine/netstack"

	"github.com/tailplane/tailplane/proxy/config"
)

// advertisement is what the node's prefs advertise to control for the
// connector role: routes (the exit routes 0.0.0.0/0 and ::/0 included) and
// whether it is an app connector. The zero value advertises nothing (every
// other role).
type advertisement struct {
	routes       []netip.Prefix // sorted, masked
	exitNode     bool
	appConnector bool
}

func (a *advertisement) equal(b *advertisement) bool {
	return slices.Equal(a.routes, b.routes) && a.exitNode == b.exitNode && a.appConnector == b.appConnector
}

// advertisementFor derives the advertisement from a validated config.
func advertisementFor(cfg *config.Config) (*advertisement, error) {
	a := &advertisement{}
	c := cfg.Connector
	if cfg.Role != config.RoleConnector || c == nil {
		return a, nil
	}
	for _, r := range c.Routes {
		p, err := netip.ParsePrefix(r)
		if err != nil {
			return nil, fmt.Errorf("connector.routes: %w", err)
		}
		a.routes = append(a.routes, p.Masked())
	}
	if c.ExitNode {
		a.exitNode = true
		a.routes = append(a.routes, tsaddr.ExitRoutes()...)
	}
	a.appConnector = c.AppConnector
	slices.SortFunc(a.routes, func(x, y netip.Prefix) int {
		if d := x.Addr().Compare(y.Addr()); d != 0 {
			return d
		}
		return x.Bits() - y.Bits()
	})
	return a, nil
}

// forwards reports whether a flow to dst that no listener of the node takes
// goes to the host network. The node's packet filter has already dropped
// packets to anything outside its advertised routes (its "local nets" are
// its addresses plus the advertised routes, with the exit routes shrunk as
// tailscaled does); this check keeps forwarding off for every other role
// and for tailnet addresses, whatever the filter says.
func (a *advertisement) forwards(dst netip.Addr) bool {
	if a == nil || tsaddr.IsTailscaleIP(dst) {
		return false
	}
	// An app connector's routes are learned from DNS at run time and live
	// in the node's prefs only; an exit node's cover everything.
	if a.exitNode || a.appConnector {
		return true
	}
	for _, p := range a.routes {
		if p.Contains(dst) {
			return true
		}
	}
	return false
}

// installForwarding makes the node's userspace network stack forward, to
// the host network, the TCP and UDP flows it receives for the connector's
// routes. tsnet sets netstack's ProcessSubnets, so such packets do reach
// netstack, but its flow hooks then intercept every flow that no tsnet
// listener takes and reject it (TCP RST, UDP dropped). The wrappers below
// answer "don't intercept" for the connector's destinations instead, which
// hands the flow to netstack's own forwarder: the code tailscaled runs in
// userspace-networking mode, which dials the destination from the host
// before it completes the client's handshake (a refused destination is a
// RST to the client, as with a kernel router) and relays TCP half-closes
// and UDP flows.
//
// It must run after node.Start and before the node has peers: the hooks are
// plain fields of netstack.Impl, read on every new flow.
func (e *Engine) installForwarding(node *tsnet.Server) error {
	ns, ok := node.Sys().Netstack.Get().(*netstack.Impl)
	if !ok || ns == nil {
		return errors.New("the tailnet node has no userspace network stack")
	}
	tcp, udp := ns.GetTCPHandlerForFlow, ns.GetUDPHandlerForFlow
	ns.GetTCPHandlerForFlow = func(src, dst netip.AddrPort) (func(net.Conn), bool) {
		// Tailscale Service ports first: tailscaled intercepted them for
		// this node (advertiseServices) and left the flow to this hook.
		if h := e.vipHandler(dst); h != nil {
			return h, true
		}
		var h func(net.Conn)
		intercept := true
		if tcp != nil {
			h, intercept = tcp(src, dst)
		}
		if h == nil && e.forward.Load().forwards(dst.Addr()) {
			return nil, false
		}
		return h, intercept
	}
	ns.GetUDPHandlerForFlow = func(src, dst netip.AddrPort) (func(nettype.ConnPacketConn), bool) {
		var h func(nettype.ConnPacketConn)
		intercept := true
		if udp != nil {
			h, intercept = udp(src, dst)
		}
		if h == nil && e.forward.Load().forwards(dst.Addr()) {
			return nil, false
		}
		return h, intercept
	}
	return nil
}

// advertise sets the node's advertised routes and app-connector pref to
// what cfg asks, through the node's prefs as `tailscale set
// --advertise-routes --advertise-exit-node --advertise-connector` does: the
// node tells control with its next map request, on the same device. It
// edits the prefs only when the advertisement changed, because an edit of
// the routes also drops the routes an app connector learned from DNS.
func (e *Engine) advertise(ctx context.Context, node *tsnet.Server, cfg *config.Config) error {
	want, err := advertisementFor(cfg)
	if err != nil {
		return err
	}
	if cur := e.advertised; cur != nil && cur.equal(want) {
		return nil
	}
	if e.advertised == nil && want.equal(&advertisement{}) {
		// tsnet starts every node with fresh prefs (saved state keeps
		// only the node's identity), so there is nothing to withdraw.
		e.advertised = want
		return nil
	}
	lc, err := node.LocalClient()
	if err != nil {
		return fmt.Errorf("connector: advertise routes: %w", err)
	}
	mp := &ipn.MaskedPrefs{
		Prefs: ipn.Prefs{
			AdvertiseRoutes: want.routes,
			AppConnector:    ipn.AppConnectorPrefs{Advertise: want.appConnector},
		},
		AdvertiseRoutesSet: true,
		AppConnectorSet:    true,
	}
	if _, err := lc.EditPrefs(ctx, mp); err != nil {
		return fmt.Errorf("connector: advertise routes %v (app connector %t): %w", want.routes, want.appConnector, err)
	}
	e.advertised = want
	if cfg.Role == config.RoleConnector {
		e.forward.Store(want)
		e.log.Info("connector: advertising", "routes", want.routes, "exitNode", want.exitNode, "appConnector", want.appConnector)
	} else {
		e.forward.Store(nil)
	}
	return nil
}
