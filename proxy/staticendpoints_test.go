package proxy

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/tailplane/tailplane/internal/tailnettest"
	"github.com/tailplane/tailplane/internal/testpoll"
	"github.com/tailplane/tailplane/proxy/config"
)

// The config's listen port is the UDP port the node's WireGuard uses, and
// its static endpoints (a node's external IP and a NodePort, for a
// ProxyClass's staticEndpoints) are among the endpoints the node sends
// control for its peers, with those it finds itself; a new config changes
// them live.
func TestStaticEndpointsReachPeers(t *testing.T) {
	tn := tailnettest.New(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tcpHalfCloseServer(t, ln)
	// A free UDP port for the node's WireGuard.
	pc, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := pc.LocalAddr().(*net.UDPAddr).Port
	pc.Close()

	cfg := newConfig(tn, "static", config.RoleIngressL4)
	cfg.L4 = &config.L4{Ports: []config.PortMap{{Protocol: config.TCP, Port: 5432, Target: ln.Addr().String()}}}
	cfg.ListenPort, cfg.StaticEndpoints = port, []string{"192.0.2.10:30001"}
	r := start(t, tn, cfg, Options{})
	lc, err := r.engine.node.LocalClient()
	if err != nil {
		t.Fatal(err)
	}
	peerAddrs := func() ([]string, error) {
		st, err := lc.Status(context.Background())
		if err != nil || st.Self == nil {
			return nil, fmt.Errorf("own status: %v", err)
		}
		return st.Self.Addrs, nil
	}
	has := func(want string) func() error {
		return func() error {
			addrs, err := peerAddrs()
			if err != nil {
				return err
			}
			if !slices.Contains(addrs, want) {
				return fmt.Errorf("endpoints %v, want %s among them", addrs, want)
			}
			return nil
		}
	}
	testpoll.Until(t, 20*time.Second, "the static endpoint among the node's endpoints", has("192.0.2.10:30001"))
	testpoll.Until(t, 20*time.Second, "the listen port in the node's own endpoints", func() error {
		addrs, err := peerAddrs()
		if err != nil {
			return err
		}
		for _, a := range addrs {
			if _, p, _ := net.SplitHostPort(a); p == strconv.Itoa(port) {
				return nil
			}
		}
		return fmt.Errorf("endpoints %v, none on UDP port %d", addrs, port)
	})

	cfg.StaticEndpoints = []string{"192.0.2.11:30002"}
	writeConfig(t, r.cfgPath, cfg)
	testpoll.Until(t, 20*time.Second, "the new static endpoint", has("192.0.2.11:30002"))
	testpoll.Until(t, 20*time.Second, "the old static endpoint gone", func() error {
		addrs, err := peerAddrs()
		if err == nil && slices.Contains(addrs, "192.0.2.10:30001") {
			return fmt.Errorf("endpoints %v still hold the old one", addrs)
		}
		return err
	})
}
