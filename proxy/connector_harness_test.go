package proxy

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"testing"
	"time"

	"tailscale.com/ipn"
	"tailscale.com/net/tsaddr"
	"tailscale.com/tailcfg"
	"tailscale.com/tsnet"
	"tailscale.com/types/key"
	"tailscale.com/wgengine/netstack"

	"github.com/tailplane/tailplane/internal/tailnettest"
	"github.com/tailplane/tailplane/internal/testpoll"
)

// hostAddr is an IPv4 address of this machine that is neither loopback,
// link-local nor a tailnet address: a destination "behind" the connector.
// Loopback does not do: the userspace stack drops packets to 127.0.0.0/8
// that arrive from the tailnet, as a kernel drops martians.
func hostAddr(t *testing.T) netip.Addr {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		p, err := netip.ParsePrefix(a.String())
		if err != nil {
			continue
		}
		ip := p.Addr()
		if ip.Is4() && ip.IsGlobalUnicast() && !tsaddr.IsTailscaleIP(ip) {
			return ip
		}
	}
	t.Fatalf("this machine has no non-loopback IPv4 address to route to (interfaces: %v)", addrs)
	return netip.Addr{}
}

// dialOverTailnet dials addr from client's userspace network stack only:
// the packets go to the tailnet or nowhere, whereas tsnet.Server.Dial
// falls back to the host network for an address no peer routes (which
// would reach this machine's listeners directly).
func dialOverTailnet(ctx context.Context, client *tsnet.Server, network string, addr netip.AddrPort) (net.Conn, error) {
	ns, ok := client.Sys().Netstack.Get().(*netstack.Impl)
	if !ok {
		return nil, fmt.Errorf("client has no netstack")
	}
	src, src6 := client.TailscaleIPs()
	if addr.Addr().Is6() {
		src = src6
	}
	if network == "udp" {
		return ns.DialContextUDPWithBind(ctx, src, addr)
	}
	return ns.DialContextTCPWithBind(ctx, src, addr)
}

// tcpOverTailnet sends "ping" to the half-close echo server at addr over
// the tailnet.
func tcpOverTailnet(client *tsnet.Server, addr netip.AddrPort, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	c, err := dialOverTailnet(ctx, client, "tcp", addr)
	if err != nil {
		return err
	}
	return ping(c)
}

// udpOverTailnet exchanges one datagram with the UDP echo server at addr.
func udpOverTailnet(client *tsnet.Server, addr netip.AddrPort) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := dialOverTailnet(ctx, client, "udp", addr)
	if err != nil {
		return err
	}
	return udpPing(c)
}

// echoServersOn starts a TCP half-close echo and a UDP echo on ip.
func echoServersOn(t *testing.T, ip netip.Addr) (tcp, udp netip.AddrPort) {
	t.Helper()
	ln, err := net.Listen("tcp", netip.AddrPortFrom(ip, 0).String())
	if err != nil {
		t.Fatal(err)
	}
	tcpHalfCloseServer(t, ln)
	udp = netip.MustParseAddrPort(udpEchoServerOn(t, netip.AddrPortFrom(ip, 0).String()))
	return netip.MustParseAddrPort(ln.Addr().String()), udp
}

// nodeKey is the running node's public key, control's handle on it.
func nodeKey(t *testing.T, node *tsnet.Server) key.NodePublic {
	t.Helper()
	lc, err := node.LocalClient()
	if err != nil {
		t.Fatal(err)
	}
	st, err := lc.Status(context.Background())
	if err != nil || st.Self == nil {
		t.Fatalf("status: %v", err)
	}
	return st.Self.PublicKey
}

// controlHostinfo is the node's Hostinfo as control last received it.
func controlHostinfo(tn *tailnettest.Tailnet, k key.NodePublic) (tailcfg.HostinfoView, error) {
	n := tn.Control.Node(k)
	if n == nil || !n.Hostinfo.Valid() {
		return tailcfg.HostinfoView{}, fmt.Errorf("control has no hostinfo for %s", k.ShortString())
	}
	return n.Hostinfo, nil
}

// waitAdvertised waits until control received exactly want (any order) as
// the node's advertised routes.
func waitAdvertised(t *testing.T, tn *tailnettest.Tailnet, k key.NodePublic, want ...netip.Prefix) {
	t.Helper()
	want = slices.Clone(want)
	slices.SortFunc(want, comparePrefix)
	testpoll.Until(t, 20*time.Second, fmt.Sprintf("control sees routes %v advertised", want), func() error {
		hi, err := controlHostinfo(tn, k)
		if err != nil {
			return err
		}
		got := hi.RoutableIPs().AsSlice()
		slices.SortFunc(got, comparePrefix)
		if !slices.Equal(got, want) {
			return fmt.Errorf("advertised %v", got)
		}
		return nil
	})
}

func comparePrefix(a, b netip.Prefix) int {
	if d := a.Addr().Compare(b.Addr()); d != 0 {
		return d
	}
	return a.Bits() - b.Bits()
}

// approve approves the node's advertised routes in control, as an admin
// does in the console (testcontrol serves exactly the routes it is given).
func approve(t *testing.T, tn *tailnettest.Tailnet, k key.NodePublic) {
	t.Helper()
	hi, err := controlHostinfo(tn, k)
	if err != nil {
		t.Fatal(err)
	}
	tn.Control.SetSubnetRoutes(k, hi.RoutableIPs().AsSlice())
}

// editPrefs changes a client node's prefs.
func editPrefs(t *testing.T, node *tsnet.Server, mp *ipn.MaskedPrefs) {
	t.Helper()
	lc, err := node.LocalClient()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := lc.EditPrefs(ctx, mp); err != nil {
		t.Fatal(err)
	}
}

// acceptRoutes makes a client use subnet routes (`tailscale set
// --accept-routes`; off by default on Linux, so in tsnet too).
func acceptRoutes(t *testing.T, node *tsnet.Server) {
	editPrefs(t, node, &ipn.MaskedPrefs{Prefs: ipn.Prefs{RouteAll: true}, RouteAllSet: true})
}

// unreachable checks that a TCP exchange with addr over the tailnet fails.
func unreachable(t *testing.T, client *tsnet.Server, addr netip.AddrPort, why string) {
	t.Helper()
	if err := tcpOverTailnet(client, addr, 3*time.Second); err == nil {
		t.Fatalf("%s reached over the tailnet %s", addr, why)
	} else {
		t.Logf("%s unreachable %s, as expected: %v", addr, why, err)
	}
}
