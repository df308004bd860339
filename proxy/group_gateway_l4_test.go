package proxy

import (
	"context"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/tailplane/tailplane/internal/proxystate"
	"github.com/tailplane/tailplane/internal/tailnettest"
	"github.com/tailplane/tailplane/internal/testpoll"
	"github.com/tailplane/tailplane/proxy/config"
)

// A Gateway service whose UDP listener cannot open (something holds the
// port on a service address) is not advertised, and the state report says
// why; once the port is free the retry opens it and the service is
// advertised, without a config change. Then its TLS passthrough listener
// relays by SNI and its UDP listener by weight, on the service addresses.
func TestGroupGatewayServiceUnservable(t *testing.T) {
	tn := tailnettest.New(t)
	dbCert := newTestCert(t, "db.example.com")
	db := tlsNameServer(t, dbCert, "db")
	gw := config.Service{Name: "svc:gw", Gateway: &config.Gateway{Listeners: []config.Listener{
		{Name: "tls", Port: 8443, Protocol: config.ListenerTLS, TLSRoutes: []config.TLSRoute{
			{Name: "ns/db/0", Hostnames: []string{"db.example.com"}, Backends: weighted(db)}}},
		{Name: "dns", Port: 53, Protocol: config.ListenerUDP, Backends: []config.WeightedBackend{
			{Backend: config.Backend{Service: "dns", Address: udpEchoServer(t)}, Weight: 1},
			{Backend: config.Backend{Service: "gone"}, Weight: 0, Invalid: true}}},
	}}}
	cfg := newConfig(tn, "pg-0", config.RoleIngressGroup)
	cfg.Group = &config.Group{}
	rec := &statusRecorder{}
	r := start(t, tn, cfg, Options{Status: rec})
	node := r.engine.Node()

	addrs := vipAddrs(11)
	hostServices(t, tn, node, map[string][]netip.Addr{"svc:gw": addrs})
	squatter := squatUDP(t, node, netip.AddrPortFrom(addrs[0], 53))
	cfg.Group.Services = []config.Service{gw}
	writeConfig(t, r.cfgPath, cfg)
	waitUnservable(t, rec, "svc:gw", "open listener group/svc:gw/udp/")
	if got := advertisedServices(t, node); len(got) != 0 {
		t.Fatalf("advertises %v with svc:gw's UDP port taken", got)
	}
	squatter.Close()
	waitServices(t, node, "svc:gw")
	testpoll.Until(t, 10*time.Second, "svc:gw reported advertised", func() error {
		if got := rec.getServices(); got["svc:gw"] != (proxystate.ServiceReport{Advertised: true}) {
			return fmt.Errorf("report %v", got)
		}
		return nil
	})

	for _, a := range addrs {
		testpoll.Until(t, 20*time.Second, "UDP to svc:gw on "+a.String(), func() error {
			return udpOverTailnet(r.client, netip.AddrPortFrom(a, 53))
		})
	}
	passthrough := func(sni string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		c, err := dialOverTailnet(ctx, r.client, "tcp", netip.AddrPortFrom(addrs[0], 8443))
		if err != nil {
			return "", err
		}
		return readOverTLS(ctx, c, sni, dbCert.roots)
	}
	var got string
	testpoll.Until(t, 20*time.Second, "TLS passthrough to svc:gw", func() (err error) { got, err = passthrough("db.example.com"); return err })
	if got != "db" {
		t.Errorf("passthrough for db.example.com reached %q, want db", got)
	}
	if got, err := passthrough("other.example.com"); err == nil {
		t.Errorf("an SNI no route takes reached %q, want the connection closed", got)
	}
}
