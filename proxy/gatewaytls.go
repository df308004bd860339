package proxy

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/tailplane/tailplane/proxy/config"
	"github.com/tailplane/tailplane/proxy/l4"
)

// gatewayTLSConfig serves the certificates of the HTTPS listeners on port,
// chosen by SNI against their hostnames, from the current plan; funnel
// narrows them to the listeners exposed through Funnel.
func (e *Engine) gatewayTLSConfig(port int, funnel bool) *tls.Config {
	return e.gatewayTLSFrom(e.gateway.Load, port, funnel)
}

// gatewayTLSFrom is gatewayTLSConfig from the plan load returns at each
// handshake.
func (e *Engine) gatewayTLSFrom(load func() *gatewayPlan, port int, funnel bool) *tls.Config {
	return &tls.Config{
		NextProtos: []string{"h2", "http/1.1"},
		MinVersion: tls.VersionTLS12,
		GetCertificate: func(hi *tls.ClientHelloInfo) (*tls.Certificate, error) {
			var pc *portCerts
			if plan := load(); plan != nil && funnel {
				pc = plan.funnelCerts[port]
			} else if plan != nil {
				pc = plan.certs[port]
			}
			if pc == nil {
				return nil, fmt.Errorf("no HTTPS listener on port %d", port)
			}
			if src, ok := pc.hosts.First(hi.ServerName); ok {
				return src(hi)
			}
			if hi.ServerName == "" {
				return pc.first(hi)
			}
			// No listener answers for the name: crypto/tls sends the
			// unrecognized_name alert for a nil certificate.
			return nil, nil
		},
	}
}

// refreshGatewayCerts re-reads the current gateway config's certificates
// (Secrets renewed by cert-manager, say) and serves them from now on; one
// that became unusable is logged and the loaded ones keep serving.
func (e *Engine) refreshGatewayCerts(ctx context.Context) {
	cur, plan := e.current, e.gateway.Load()
	if cur == nil || cur.Gateway == nil || plan == nil || !usesSecrets(cur.Gateway) {
		return
	}
	certs, funnel, err := e.gatewayCerts(ctx, cur.Gateway)
	if err != nil {
		e.log.Warn("cannot refresh the gateway's TLS certificates; keeping the loaded ones", "err", err)
		return
	}
	next := *plan
	next.certs, next.funnelCerts = certs, funnel
	e.gateway.Store(&next)
}

// usesSecrets reports whether an HTTPS listener of g serves a Secret's
// certificate (the node's own certificate renews by itself).
func usesSecrets(g *config.Gateway) bool {
	for _, l := range g.Listeners {
		if l.Protocol == config.ListenerHTTPS && l.TLS.EffectiveMode() == config.TLSSecret {
			return true
		}
	}
	return false
}

// helloTimeout bounds the wait for a passthrough client's ClientHello.
const helloTimeout = 10 * time.Second

// passthroughPicker chooses the backend of a TLS passthrough connection on
// port by the SNI of its ClientHello, which it reads and then replays to
// the backend untouched, from the plan load returns at each connection.
func (e *Engine) passthroughPicker(load func() *gatewayPlan, port int) l4.Picker {
	return func(ctx context.Context, c net.Conn) (net.Conn, string) {
		sni, replay, err := peekSNI(ctx, c, helloTimeout)
		if err != nil {
			e.log.Debug("TLS passthrough: no ClientHello", "remote", c.RemoteAddr(), "err", err)
			return c, ""
		}
		plan := load()
		if plan == nil || plan.sni[port] == nil {
			return replay, ""
		}
		name, b, ok := plan.sni[port].Pick(sni)
		if !ok {
			e.log.Debug("TLS passthrough: no backend for the server name", "sni", sni, "route", name, "port", port)
			return replay, ""
		}
		return replay, b.Address
	}
}

// peekSNI reads the TLS ClientHello at the start of c and returns its
// server name, and a connection that replays what was read before the
// rest of c. crypto/tls parses the ClientHello: a server handshake on a
// read-only view of c stops in GetConfigForClient, which sees it.
func peekSNI(ctx context.Context, c net.Conn, timeout time.Duration) (string, net.Conn, error) {
	var seen bytes.Buffer
	var sni string
	var hello bool
	stop := errors.New("ClientHello read")
	if err := c.SetReadDeadline(time.Now().Add(timeout)); err != nil {
		return "", nil, fmt.Errorf("set the ClientHello deadline: %w", err)
	}
	hctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	err := tls.Server(helloReader{Conn: c, r: io.TeeReader(c, &seen)}, &tls.Config{
		GetConfigForClient: func(hi *tls.ClientHelloInfo) (*tls.Config, error) {
			sni, hello = hi.ServerName, true
			return nil, stop
		},
	}).HandshakeContext(hctx)
	if !hello {
		return "", nil, fmt.Errorf("read the TLS ClientHello: %w", err)
	}
	if err := c.SetReadDeadline(time.Time{}); err != nil {
		return "", nil, fmt.Errorf("clear the ClientHello deadline: %w", err)
	}
	return sni, &replayConn{Conn: c, r: io.MultiReader(&seen, c)}, nil
}

// helloReader is the read-only view of a connection the ClientHello is
// parsed from: the handshake's answer (an alert) never reaches the client,
// and it cannot close the connection.
type helloReader struct {
	net.Conn
	r io.Reader
}

func (h helloReader) Read(p []byte) (int, error)  { return h.r.Read(p) }
func (h helloReader) Write(p []byte) (int, error) { return 0, io.ErrClosedPipe }
func (h helloReader) Close() error                { return nil }

// replayConn reads what the ClientHello peek consumed, then the rest of
// the connection.
type replayConn struct {
	net.Conn
	r io.Reader
}

func (c *replayConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// CloseWrite half-closes the connection, so the relay forwards a backend's
// end of stream as it does on plain TCP listeners.
func (c *replayConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return c.Conn.Close()
}
