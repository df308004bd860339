package tailnet

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"

	"tailscale.com/derp/derpserver"
	"tailscale.com/net/stun"
	"tailscale.com/tailcfg"
	"tailscale.com/types/key"
	"tailscale.com/types/logger"
)

// relay is a DERP server (HTTPS with a self-signed certificate, which nodes
// accept because the DERP map marks it InsecureForTests) and a STUN server,
// both on host.
type relay struct {
	derp *derpserver.Server
	http *httptest.Server
	stun net.PacketConn
}

func startRelay(ctx context.Context, host string, logf logger.Logf) (*relay, *tailcfg.DERPMap, error) {
	d := derpserver.New(key.NewNode(), logf)
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return nil, nil, err
	}
	hs := httptest.NewUnstartedServer(derpserver.Handler(d))
	hs.Listener.Close()
	hs.Listener = ln
	hs.Config.ErrorLog = logger.StdLogger(logf)
	hs.Config.TLSNextProto = map[string]func(*http.Server, *tls.Conn, http.Handler){}
	hs.StartTLS()

	pc, err := lc.ListenPacket(ctx, "udp", net.JoinHostPort(host, "0"))
	if err != nil {
		hs.Close()
		d.Close()
		return nil, nil, err
	}
	go serveSTUN(pc)
	m := &tailcfg.DERPMap{Regions: map[int]*tailcfg.DERPRegion{1: {
		RegionID: 1, RegionCode: "devcluster", RegionName: "devcluster",
		Nodes: []*tailcfg.DERPNode{{
			Name: "1a", RegionID: 1, HostName: host, IPv4: host, IPv6: "none",
			STUNPort: pc.LocalAddr().(*net.UDPAddr).Port, DERPPort: ln.Addr().(*net.TCPAddr).Port,
			InsecureForTests: true, STUNTestIP: host,
		}},
	}}}
	return &relay{derp: d, http: hs, stun: pc}, m, nil
}

// Relay is a DERP and STUN relay running for another control server
// (devcluster's Headscale).
type Relay struct{ r *relay }

// StartRelay starts a relay on host, as Start does for its own control
// server, and returns the DERP map that names it.
func StartRelay(ctx context.Context, host string, logf logger.Logf) (*Relay, *tailcfg.DERPMap, error) {
	r, m, err := startRelay(ctx, host, logf)
	if err != nil {
		return nil, nil, err
	}
	return &Relay{r: r}, m, nil
}

// Close stops the relay.
func (r *Relay) Close() { r.r.close() }

func (r *relay) close() {
	r.http.CloseClientConnections()
	r.http.Close()
	r.derp.Close()
	r.stun.Close()
}

// serveSTUN answers binding requests with the sender's address.
func serveSTUN(pc net.PacketConn) {
	buf := make([]byte, 1500)
	for {
		n, from, err := pc.ReadFrom(buf)
		if err != nil {
			return
		}
		txid, err := stun.ParseBindingRequest(buf[:n])
		if err != nil {
			continue
		}
		ua, ok := from.(*net.UDPAddr)
		if !ok {
			continue
		}
		_, _ = pc.WriteTo(stun.Response(txid, ua.AddrPort()), from)
	}
}

// connTracker is a listener that remembers its open connections, so that
// Close can end the ones http.Server.Close leaves alone: connections
// hijacked for Noise (/ts2021), which would otherwise keep talking to a
// stopped control server.
type connTracker struct {
	net.Listener
	mu    sync.Mutex
	conns map[*trackedConn]struct{}
}

type trackedConn struct {
	net.Conn
	t *connTracker
}

func (l *connTracker) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	tc := &trackedConn{Conn: c, t: l}
	l.mu.Lock()
	l.conns[tc] = struct{}{}
	l.mu.Unlock()
	return tc, nil
}

func (c *trackedConn) Close() error {
	c.t.mu.Lock()
	delete(c.t.conns, c)
	c.t.mu.Unlock()
	return c.Conn.Close()
}

// closeAll closes every connection still open.
func (l *connTracker) closeAll() {
	l.mu.Lock()
	conns := make([]*trackedConn, 0, len(l.conns))
	for c := range l.conns {
		conns = append(conns, c)
	}
	l.mu.Unlock()
	for _, c := range conns {
		_ = c.Close()
	}
}
