package proxy

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"tailscale.com/ipn"
	"tailscale.com/net/tsaddr"
	"tailscale.com/tailcfg"

	"github.com/tailplane/tailplane/internal/tailnettest"
	"github.com/tailplane/tailplane/internal/testpoll"
	"github.com/tailplane/tailplane/proxy/config"
)

// Subnet router: the connector advertises a route holding an address of
// this machine; until control approves the route a tailnet client cannot
// reach it, once approved the client reaches a TCP server (half-close
// included) and a UDP server there through the connector's userspace
// network stack, and a closed port is refused at once rather than hanging.
func TestConnectorSubnetRouter(t *testing.T) {
	tn := tailnettest.New(t)
	ip := hostAddr(t)
	tcpAddr, udpAddr := echoServersOn(t, ip)
	route := netip.PrefixFrom(ip, 32)
	cfg := newConfig(tn, "subnet-router", config.RoleConnector)
	cfg.Connector = &config.Connector{Routes: []string{route.String()}}
	r := start(t, tn, cfg, Options{})
	acceptRoutes(t, r.client)
	k := nodeKey(t, r.engine.Node())
	waitAdvertised(t, tn, k, route)

	unreachable(t, r.client, tcpAddr, "with the route not approved")

	approve(t, tn, k)
	testpoll.Until(t, 20*time.Second, "TCP through the subnet router", func() error {
		return tcpOverTailnet(r.client, tcpAddr, 5*time.Second)
	})
	testpoll.Until(t, 10*time.Second, "UDP through the subnet router", func() error {
		return udpOverTailnet(r.client, udpAddr)
	})

	// A port nothing listens on: netstack dials before it completes the
	// client's handshake, so the client sees a refusal.
	closed := netip.AddrPortFrom(ip, uint16(freePort(t)))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if c, err := dialOverTailnet(ctx, r.client, "tcp", closed); err == nil {
		c.Close()
		t.Fatalf("dial of closed port %s through the subnet router succeeded", closed)
	} else if ctx.Err() != nil {
		t.Fatalf("dial of closed port %s hung instead of being refused: %v", closed, err)
	}
}

// Exit node: the connector advertises 0.0.0.0/0 and ::/0; with them
// approved, a client that has not selected it as exit node cannot reach a
// non-tailnet address, and reaches it through the connector once it has.
func TestConnectorExitNode(t *testing.T) {
	tn := tailnettest.New(t)
	ip := hostAddr(t)
	tcpAddr, udpAddr := echoServersOn(t, ip)
	cfg := newConfig(tn, "exit", config.RoleConnector)
	cfg.Connector = &config.Connector{ExitNode: true}
	r := start(t, tn, cfg, Options{})
	k := nodeKey(t, r.engine.Node())
	waitAdvertised(t, tn, k, tsaddr.ExitRoutes()...)
	approve(t, tn, k)

	unreachable(t, r.client, tcpAddr, "without an exit node selected")

	lc, err := r.engine.Node().LocalClient()
	if err != nil {
		t.Fatal(err)
	}
	st, err := lc.Status(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	editPrefs(t, r.client, &ipn.MaskedPrefs{Prefs: ipn.Prefs{ExitNodeID: st.Self.ID}, ExitNodeIDSet: true})
	testpoll.Until(t, 20*time.Second, "TCP through the exit node", func() error {
		return tcpOverTailnet(r.client, tcpAddr, 5*time.Second)
	})
	testpoll.Until(t, 10*time.Second, "UDP through the exit node", func() error {
		return udpOverTailnet(r.client, udpAddr)
	})
}

// Changing the routes in the config changes what the running node
// advertises, on the same device: same node key, same device ID, no config
// error; exitNode adds the exit routes, a bad route is refused without
// disturbing what is advertised, and a role other than connector withdraws
// everything.
func TestConnectorRoutesChangeLive(t *testing.T) {
	tn := tailnettest.New(t)
	cfg := newConfig(tn, "routes", config.RoleConnector)
	cfg.Connector = &config.Connector{Routes: []string{"10.40.0.0/14"}}
	rec := &statusRecorder{}
	r := start(t, tn, cfg, Options{Status: rec})
	k := nodeKey(t, r.engine.Node())
	waitAdvertised(t, tn, k, netip.MustParsePrefix("10.40.0.0/14"))
	testpoll.Until(t, 20*time.Second, "device reported", func() error {
		if d, _ := rec.get(); d.ID == "" {
			return fmt.Errorf("no device_id yet")
		}
		return nil
	})
	before, _ := rec.get()

	cfg.Connector = &config.Connector{Routes: []string{"10.40.0.0/14", "192.168.7.0/24"}, ExitNode: true}
	writeConfig(t, r.cfgPath, cfg)
	waitAdvertised(t, tn, k, append(tsaddr.ExitRoutes(), netip.MustParsePrefix("10.40.0.0/14"), netip.MustParsePrefix("192.168.7.0/24"))...)

	cfg.Connector = &config.Connector{Routes: []string{"192.168.7.0/24"}}
	writeConfig(t, r.cfgPath, cfg)
	waitAdvertised(t, tn, k, netip.MustParsePrefix("192.168.7.0/24"))

	// A bad route is refused with a specific error; the node keeps
	// advertising what it did.
	bad := *cfg
	bad.Connector = &config.Connector{Routes: []string{"10.0.0.0/8", "10.1.0.0/16"}}
	writeConfig(t, r.cfgPath, &bad)
	testpoll.Until(t, 10*time.Second, "overlapping routes refused", func() error {
		if _, cfgErr := rec.get(); !strings.Contains(cfgErr, `connector.routes[1]: "10.1.0.0/16" overlaps 10.0.0.0/8`) {
			return fmt.Errorf("config_error %q", cfgErr)
		}
		return nil
	})
	waitAdvertised(t, tn, k, netip.MustParsePrefix("192.168.7.0/24"))

	cfg.Role, cfg.Connector = config.RoleIngressL4, nil
	cfg.L4 = &config.L4{Ports: []config.PortMap{{Port: 5432, Target: "127.0.0.1:5432"}}}
	writeConfig(t, r.cfgPath, cfg)
	waitAdvertised(t, tn, k)

	if got := nodeKey(t, r.engine.Node()); got != k {
		t.Fatalf("node key changed from %s to %s; route changes keep the device", k.ShortString(), got.ShortString())
	}
	testpoll.Until(t, 10*time.Second, "config error cleared", func() error {
		if _, cfgErr := rec.get(); cfgErr != "" {
			return fmt.Errorf("config_error %q", cfgErr)
		}
		return nil
	})
	if d, _ := rec.get(); d.ID != before.ID {
		t.Fatalf("device %s replaced by %s", before.ID, d.ID)
	}
	if n := len(tn.Control.AllNodes()); n != 2 {
		t.Fatalf("control has %d nodes, want the connector and the client only", n)
	}
}

// App connector: the pref is set on the node, the node reports itself as an
// app connector in its Hostinfo and advertises its pre-configured routes.
// The routes of the app-connector node attribute control sends (what the
// tailnet policy's nodeAttrs give) are advertised too, and once approved a
// client reaches them through the connector. Turning it off withdraws the
// attribute's routes and the Hostinfo flag.
func TestConnectorAppConnector(t *testing.T) {
	tn := tailnettest.New(t)
	ip := hostAddr(t)
	tcpAddr, udpAddr := echoServersOn(t, ip)
	preset := netip.MustParsePrefix("198.51.100.0/24")
	cfg := newConfig(tn, "appc", config.RoleConnector)
	cfg.Connector = &config.Connector{AppConnector: true, Routes: []string{preset.String()}}
	r := start(t, tn, cfg, Options{})
	acceptRoutes(t, r.client)
	node := r.engine.Node()
	k := nodeKey(t, node)
	waitAdvertised(t, tn, k, preset)
	appConnector := func(want bool) func() error {
		return func() error {
			lc, err := node.LocalClient()
			if err != nil {
				return err
			}
			prefs, err := lc.GetPrefs(context.Background())
			if err != nil {
				return err
			}
			if prefs.AppConnector.Advertise != want {
				return fmt.Errorf("prefs AppConnector.Advertise %t", prefs.AppConnector.Advertise)
			}
			hi, err := controlHostinfo(tn, k)
			if err != nil {
				return err
			}
			if got, _ := hi.AppConnector().Get(); got != want {
				return fmt.Errorf("control sees Hostinfo.AppConnector %v", hi.AppConnector())
			}
			return nil
		}
	}
	testpoll.Until(t, 20*time.Second, "app connector advertised", appConnector(true))

	learned := netip.PrefixFrom(ip, 32)
	attr := fmt.Sprintf(`{"name":"app","connectors":["*"],"domains":["app.example.test"],"routes":[%q]}`, learned)
	tn.Control.SetNodeCapMap(k, tailcfg.NodeCapMap{appConnectorAttr: []tailcfg.RawMessage{tailcfg.RawMessage(attr)}})
	waitAdvertised(t, tn, k, preset, learned)
	approve(t, tn, k)
	testpoll.Until(t, 20*time.Second, "TCP through the app connector", func() error {
		return tcpOverTailnet(r.client, tcpAddr, 5*time.Second)
	})
	testpoll.Until(t, 10*time.Second, "UDP through the app connector", func() error {
		return udpOverTailnet(r.client, udpAddr)
	})

	cfg.Connector = &config.Connector{Routes: []string{preset.String()}}
	writeConfig(t, r.cfgPath, cfg)
	testpoll.Until(t, 20*time.Second, "app connector withdrawn", appConnector(false))
	waitAdvertised(t, tn, k, preset)
}

// appConnectorAttr is the node attribute through which control gives app
// connectors their domains and routes (tailscaled's appConnectorCapName).
const appConnectorAttr tailcfg.NodeCapability = "tailscale.com/app-connectors"
