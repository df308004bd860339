package proxy

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"tailscale.com/tsnet"

	"github.com/tailplane/tailplane/internal/tailnettest"
	"github.com/tailplane/tailplane/internal/testpoll"
	"github.com/tailplane/tailplane/proxy/config"
)

// tcpHalfCloseServer reads until EOF, then answers "got:<data>" and closes:
// it only works if the proxy forwards the client's half-close.
func tcpHalfCloseServer(t *testing.T, ln net.Listener) {
	serveConns(t, ln, func(c net.Conn) {
		data, _ := io.ReadAll(c)
		fmt.Fprintf(c, "got:%s", data)
	})
}

// serveConns runs handle on every connection ln accepts, each in its own
// goroutine, and closes the connection after; ln closes with the test.
func serveConns(t *testing.T, ln net.Listener, handle func(net.Conn)) {
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); handle(c) }()
		}
	}()
}

func udpEchoServer(t *testing.T) string { return udpEchoServerOn(t, "127.0.0.1:0") }

// udpEchoServerOn answers every datagram to addr with "echo:" and the
// datagram, and returns the address it listens on.
func udpEchoServerOn(t *testing.T, addr string) string {
	t.Helper()
	pc, err := net.ListenPacket("udp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	go func() {
		buf := make([]byte, 2048)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			pc.WriteTo(append([]byte("echo:"), buf[:n]...), from)
		}
	}()
	return pc.LocalAddr().String()
}

// pingEcho sends "ping" through the TCP echo backend at addr, dialled from
// client, and checks the echo.
func pingEcho(ctx context.Context, client *tsnet.Server, addr string) error {
	c, err := client.Dial(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	return ping(c)
}

// ping sends "ping" on c, half-closes it and checks the half-close echo
// server's answer; it closes c.
func ping(c net.Conn) error {
	got, err := halfCloseRoundTrip(c, "ping")
	if err != nil || got != "got:ping" {
		return fmt.Errorf("got %q, %v", got, err)
	}
	return nil
}

// udpPing sends "dns?" on c and checks the UDP echo server's answer.
func udpPing(c net.Conn) error {
	got, err := udpRoundTrip(c, "dns?")
	if err != nil || got != "echo:dns?" {
		return fmt.Errorf("got %q, %v", got, err)
	}
	return nil
}

// halfCloseRoundTrip writes msg, half-closes and reads the whole answer.
func halfCloseRoundTrip(c net.Conn, msg string) (string, error) {
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, msg); err != nil {
		return "", err
	}
	cw, ok := c.(interface{ CloseWrite() error })
	if !ok {
		return "", fmt.Errorf("%T cannot half-close", c)
	}
	if err := cw.CloseWrite(); err != nil {
		return "", err
	}
	b, err := io.ReadAll(c)
	return string(b), err
}

func udpRoundTrip(c net.Conn, msg string) (string, error) {
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Write([]byte(msg)); err != nil {
		return "", err
	}
	buf := make([]byte, 2048)
	n, err := c.Read(buf)
	return string(buf[:n]), err
}

// L4 ingress: a TCP port (with half-close) and a UDP port on the tailnet
// node forwarded to loopback "ClusterIP" services.
func TestL4TCPAndUDPEcho(t *testing.T) {
	tn := tailnettest.New(t)
	tcpLn, _ := net.Listen("tcp", "127.0.0.1:0")
	tcpHalfCloseServer(t, tcpLn)
	udpAddr := udpEchoServer(t)
	cfg := newConfig(tn, "l4-proxy", config.RoleIngressL4)
	cfg.L4 = &config.L4{UDPIdleTimeoutSeconds: 1, Ports: []config.PortMap{
		{Protocol: config.TCP, Port: 5432, Target: tcpLn.Addr().String()},
		{Protocol: config.UDP, Port: 5353, Target: udpAddr},
		// An ExternalName Service's target: a DNS name, resolved per connection.
		{Protocol: config.TCP, Port: 5433, Target: net.JoinHostPort("localhost", strconv.Itoa(tcpLn.Addr().(*net.TCPAddr).Port))},
	}}
	r := start(t, tn, cfg, Options{LocalAddr: "127.0.0.1:0"})
	ctx := context.Background()
	for _, port := range []int{5432, 5433} {
		testpoll.Until(t, 20*time.Second, fmt.Sprintf("tcp echo on %d", port), func() error {
			return pingEcho(ctx, r.client, r.proxyAddr(port))
		})
	}
	testpoll.Until(t, 20*time.Second, "udp echo", func() error {
		c, err := r.client.Dial(ctx, "udp", r.proxyAddr(5353))
		if err != nil {
			return err
		}
		return udpPing(c)
	})
	// Health and metrics on the local address.
	resp, err := http.Get("http://" + r.engine.LocalAddr() + "/healthz")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("/healthz: %v %v", err, resp)
	}
	resp.Body.Close()
	resp, err = http.Get("http://" + r.engine.LocalAddr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`tailplane_proxy_bytes_total{direction="in",layer="l4"}`, `tailplane_proxy_config_reloads_total{result="applied"} 1`} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	// allowedSourceRanges that exclude the client shut it out at once.
	cfg.AllowedSourceRanges = []string{"10.0.0.0/8"}
	writeConfig(t, r.cfgPath, cfg)
	testpoll.Until(t, 10*time.Second, "client refused by allowedSourceRanges", func() error {
		c, err := r.client.Dial(ctx, "tcp", r.proxyAddr(5432))
		if err != nil {
			return nil // refused outright is fine too
		}
		got, _ := halfCloseRoundTrip(c, "ping")
		if got != "" {
			return fmt.Errorf("still served: %q", got)
		}
		return nil
	})
	// Idle UDP flows are closed after the idle timeout.
	testpoll.Until(t, 10*time.Second, "udp flow reaped", func() error {
		if v := gaugeValue(t, r.engine, "tailplane_proxy_active_connections", "l4"); v != 0 {
			return fmt.Errorf("%v L4 flows/connections still open", v)
		}
		return nil
	})
}

// Egress: a listener on the "pod IP" (loopback here) dials a tailnet node
// by its MagicDNS name and by IP.
func TestEgressToTailnetTarget(t *testing.T) {
	tn := tailnettest.New(t)
	target := tn.Node(t, "db")
	ln, err := target.Listen("tcp", ":5432")
	if err != nil {
		t.Fatal(err)
	}
	tcpHalfCloseServer(t, ln)
	ip4, _ := target.TailscaleIPs()
	udpLn, err := target.ListenPacket("udp", net.JoinHostPort(ip4.String(), "53"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { udpLn.Close() })
	go func() {
		buf := make([]byte, 2048)
		for {
			n, from, err := udpLn.ReadFrom(buf)
			if err != nil {
				return
			}
			udpLn.WriteTo(append([]byte("echo:"), buf[:n]...), from)
		}
	}()
	p1, p2, p3 := freePort(t), freePort(t), freePort(t)
	cfg := newConfig(tn, "egress-proxy", config.RoleEgress)
	cfg.Egress = &config.Egress{Targets: []config.EgressTarget{
		{FQDN: tailnettest.FQDN("db") + ".", Ports: []config.PortMap{{Port: p1, TargetPort: 5432}}},
		{IP: ip4.String(), Ports: []config.PortMap{{Port: p2, TargetPort: 5432}, {Protocol: config.UDP, Port: p3, TargetPort: 53}}},
	}}
	start(t, tn, cfg, Options{EgressHost: "127.0.0.1"})
	testpoll.Until(t, 20*time.Second, "udp egress", func() error {
		c, err := net.Dial("udp", fmt.Sprintf("127.0.0.1:%d", p3))
		if err != nil {
			return err
		}
		got, err := udpRoundTrip(c, "query")
		if err != nil || got != "echo:query" {
			return fmt.Errorf("got %q, %v", got, err)
		}
		return nil
	})
	for _, p := range []int{p1, p2} {
		addr := fmt.Sprintf("127.0.0.1:%d", p)
		testpoll.Until(t, 20*time.Second, "egress via "+addr, func() error {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				return err
			}
			got, err := halfCloseRoundTrip(c, "select 1")
			if err != nil || got != "got:select 1" {
				return fmt.Errorf("got %q, %v", got, err)
			}
			return nil
		})
	}
}

func freePort(t *testing.T) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// gaugeValue reads one labelled gauge/counter from the engine's registry.
func gaugeValue(t *testing.T, e *Engine, name, label string) float64 {
	mfs, err := e.Metrics().Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.Metric {
			for _, lp := range m.Label {
				if strings.Contains(lp.GetValue(), label) {
					if m.Gauge != nil {
						return m.Gauge.GetValue()
					}
					return m.Counter.GetValue()
				}
			}
		}
	}
	return 0
}

// A UDP flow has no end the proxy could wait for: at shutdown it must end
// with its listener, so that the engine stops well within the drain bound
// rather than being killed at the end of the pod's grace period.
func TestShutdownEndsLiveUDPFlows(t *testing.T) {
	tn := tailnettest.New(t)
	udpAddr := udpEchoServer(t)
	cfg := newConfig(tn, "udp-drain-proxy", config.RoleIngressL4)
	cfg.L4 = &config.L4{UDPIdleTimeoutSeconds: 600, Ports: []config.PortMap{{Protocol: config.UDP, Port: 5353, Target: udpAddr}}}
	const drain = 20 * time.Second
	r := start(t, tn, cfg, Options{DrainTimeout: drain})
	c, err := r.client.Dial(context.Background(), "udp", r.proxyAddr(5353))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	testpoll.Until(t, 20*time.Second, "live udp flow", func() error {
		_ = c.SetDeadline(time.Now().Add(2 * time.Second))
		if _, err := io.WriteString(c, "ping"); err != nil {
			return err
		}
		buf := make([]byte, 64)
		n, err := c.Read(buf)
		if err != nil || string(buf[:n]) != "echo:ping" {
			return fmt.Errorf("got %q, %v", buf[:n], err)
		}
		return nil
	})
	if v := gaugeValue(t, r.engine, "tailplane_proxy_active_connections", "l4"); v != 1 {
		t.Fatalf("%v open L4 flows, want the live one", v)
	}
	began := time.Now()
	r.cancel() // what SIGTERM does in cmd/tailplane-proxy
	select {
	case <-r.done:
	case <-time.After(drain + 10*time.Second):
		t.Fatal("Run did not return after the drain bound")
	}
	if took := time.Since(began); took > drain/2 {
		t.Fatalf("shutdown with a live UDP flow took %s, want well under the %s drain bound", took.Round(time.Millisecond), drain)
	}
	if r.runErr != nil {
		t.Fatalf("Run: %v", r.runErr)
	}
	if v := gaugeValue(t, r.engine, "tailplane_proxy_active_connections", "l4"); v != 0 {
		t.Fatalf("%v L4 flows still open after shutdown", v)
	}
}
