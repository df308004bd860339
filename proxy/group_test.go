package proxy

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/tailplane/tailplane/internal/proxystate"
	"github.com/tailplane/tailplane/internal/tailnettest"
	"github.com/tailplane/tailplane/internal/testpoll"
	"github.com/tailplane/tailplane/proxy/config"
)

// An ingress-group replica advertises its L4 Tailscale Services and serves
// their TCP and UDP ports on every address control assigned to them (IPv4
// and IPv6), connections coming straight from the node's netstack; adding
// changing and removing a service in the config changes what the node
// advertises and what answers, without a restart.
func TestGroupL4ServicesFollowTheConfig(t *testing.T) {
	tn := tailnettest.New(t)
	tcpLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tcpHalfCloseServer(t, tcpLn)
	udpTarget := udpEchoServer(t)
	db := config.Service{Name: "svc:db", L4: &config.L4{Ports: []config.PortMap{
		{Port: 5432, Target: tcpLn.Addr().String()},
		{Protocol: config.UDP, Port: 53, Target: udpTarget},
	}}}
	cfg := newConfig(tn, "pg-0", config.RoleIngressGroup)
	cfg.Group = &config.Group{Services: []config.Service{db}}
	rec := &statusRecorder{}
	r := start(t, tn, cfg, Options{Status: rec})
	node := r.engine.Node()
	waitServices(t, node, "svc:db")
	testpoll.Until(t, 10*time.Second, "svc:db reported advertised", func() error {
		if got := rec.getServices(); got["svc:db"] != (proxystate.ServiceReport{Advertised: true}) {
			return fmt.Errorf("report %v", got)
		}
		return nil
	})

	// Advertised but not routed here yet: not ready (a rolling restart
	// must not stop the other replica now).
	if r.engine.Ready() {
		t.Fatal("ready before control routes svc:db to the replica")
	}

	// Control approves the node as the service's host: ready.
	dbAddrs, webAddrs := vipAddrs(1), vipAddrs(2)
	hostServices(t, tn, node, map[string][]netip.Addr{"svc:db": dbAddrs})
	testpoll.Until(t, 10*time.Second, "ready once svc:db is routed here", func() error {
		if !r.engine.Ready() {
			return errors.New("not ready")
		}
		return nil
	})
	for _, a := range dbAddrs {
		testpoll.Until(t, 20*time.Second, "TCP to svc:db on "+a.String(), func() error {
			return tcpOverTailnet(r.client, netip.AddrPortFrom(a, 5432), 5*time.Second)
		})
		testpoll.Until(t, 20*time.Second, "UDP to svc:db on "+a.String(), func() error {
			return udpOverTailnet(r.client, netip.AddrPortFrom(a, 53))
		})
	}
	// A port the service does not have is refused, not relayed elsewhere.
	unreachable(t, r.client, netip.AddrPortFrom(dbAddrs[0], 5433), "on a port svc:db does not serve")

	// A second service through a config change.
	web := config.Service{Name: "svc:web", L4: &config.L4{Ports: []config.PortMap{{Port: 8080, Target: tcpLn.Addr().String()}}}}
	cfg.Group.Services = []config.Service{db, web}
	writeConfig(t, r.cfgPath, cfg)
	waitServices(t, node, "svc:db", "svc:web")
	// A service added to a serving replica does not make it unready.
	if !r.engine.Ready() {
		t.Fatal("a new service made the serving replica unready")
	}
	hostServices(t, tn, node, map[string][]netip.Addr{"svc:db": dbAddrs, "svc:web": webAddrs})
	testpoll.Until(t, 20*time.Second, "TCP to svc:web over IPv6", func() error {
		return tcpOverTailnet(r.client, netip.AddrPortFrom(webAddrs[1], 8080), 5*time.Second)
	})
	// The ports are per service: svc:web's address does not serve svc:db's.
	unreachable(t, r.client, netip.AddrPortFrom(webAddrs[0], 5432), "on svc:web's address with svc:db's port")

	// Changing a service's port moves it, still advertised.
	web.L4.Ports[0].Port = 8081
	cfg.Group.Services = []config.Service{db, web}
	writeConfig(t, r.cfgPath, cfg)
	testpoll.Until(t, 20*time.Second, "svc:web on its new port", func() error {
		return tcpOverTailnet(r.client, netip.AddrPortFrom(webAddrs[0], 8081), 5*time.Second)
	})
	unreachable(t, r.client, netip.AddrPortFrom(webAddrs[0], 8080), "on svc:web's old port")
	waitServices(t, node, "svc:db", "svc:web")

	// Removing svc:db withdraws it and closes its ports, even while
	// control still routes its addresses here.
	cfg.Group.Services = []config.Service{web}
	writeConfig(t, r.cfgPath, cfg)
	waitServices(t, node, "svc:web")
	testpoll.Until(t, 10*time.Second, "svc:db gone from the report", func() error {
		got := rec.getServices()
		if _, ok := got["svc:db"]; ok || !got["svc:web"].Advertised {
			return fmt.Errorf("report %v", got)
		}
		return nil
	})
	unreachable(t, r.client, netip.AddrPortFrom(dbAddrs[0], 5432), "after svc:db left the config")
	if err := udpOverTailnet(r.client, netip.AddrPortFrom(dbAddrs[1], 53)); err == nil {
		t.Fatal("svc:db's UDP port still answers after svc:db left the config")
	}
	if err := tcpOverTailnet(r.client, netip.AddrPortFrom(webAddrs[0], 8081), 5*time.Second); err != nil {
		t.Fatalf("svc:web stopped answering when svc:db left: %v", err)
	}
}

// A service the replica cannot serve is not advertised, and the state
// report says why: an L7 service whose certificate Secret cannot be read
// (no Kubernetes API here) and a UDP port whose socket cannot be bound
// (the port is taken on the service address). Once the port is free
// again, the retry opens it and the service is advertised, without a
// config change.
func TestGroupUnservableServicesAreNotAdvertised(t *testing.T) {
	tn := tailnettest.New(t)
	udpTarget := udpEchoServer(t)
	db := config.Service{Name: "svc:db", L4: &config.L4{Ports: []config.PortMap{{Port: 5432, Target: "127.0.0.1:1"}}}}
	web := config.Service{Name: "svc:web", L7: &config.L7{TLS: config.TLS{Mode: config.TLSShared, SecretName: "web-tls"},
		DefaultBackend: &config.Backend{Service: "web", Address: "127.0.0.1:1"}}}
	cfg := newConfig(tn, "pg-0", config.RoleIngressGroup)
	cfg.Group = &config.Group{Services: []config.Service{db, web}}
	rec := &statusRecorder{}
	r := start(t, tn, cfg, Options{Status: rec})
	node := r.engine.Node()
	waitServices(t, node, "svc:db")
	waitUnservable(t, rec, "svc:web", `l7.tls: tls mode "shared" needs the Kubernetes API`)

	// Control assigns svc:dns its addresses; something else holds its
	// UDP port on one of them when the config adds it.
	dnsAddrs := vipAddrs(3)
	hostServices(t, tn, node, map[string][]netip.Addr{"svc:db": vipAddrs(1), "svc:dns": dnsAddrs})
	squatter := squatUDP(t, node, netip.AddrPortFrom(dnsAddrs[0], 53))
	dns := config.Service{Name: "svc:dns", L4: &config.L4{Ports: []config.PortMap{{Protocol: config.UDP, Port: 53, Target: udpTarget}}}}
	cfg.Group.Services = []config.Service{db, web, dns}
	writeConfig(t, r.cfgPath, cfg)
	waitUnservable(t, rec, "svc:dns", "open listener group/svc:dns/udp/")
	if got := advertisedServices(t, node); len(got) != 1 || got[0] != "svc:db" {
		t.Fatalf("advertises %v with svc:dns's port taken", got)
	}
	squatter.Close()
	waitServices(t, node, "svc:db", "svc:dns")
	for _, a := range dnsAddrs {
		testpoll.Until(t, 20*time.Second, "UDP to svc:dns on "+a.String(), func() error {
			return udpOverTailnet(r.client, netip.AddrPortFrom(a, 53))
		})
	}
}
