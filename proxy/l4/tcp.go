// Package l4 relays TCP connections (with half-close) and UDP flows (one
// upstream socket per client address, closed after an idle timeout) from a
// listener to a target address reached through a dial function. Ingress L4
// uses it with a tailnet listener and the host's dialer; egress with a pod
// IP listener and the tailnet's dialer.
//
// It imports proxy/metrics, charmbracelet/log and the standard library.
package l4

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"time"

	"github.com/charmbracelet/log"

	"github.com/tailplane/tailplane/proxy/metrics"
)

// DialFunc opens a connection to a target.
type DialFunc func(ctx context.Context, network, address string) (net.Conn, error)

// TargetFunc returns the current target address; it is read on every new
// connection or flow, so a reload changes where new traffic goes.
type TargetFunc func() string

// Picker chooses the target of one accepted connection, in the
// connection's own goroutine. It may read the start of c (a TLS
// ClientHello, say) and returns the connection to relay, which must replay
// what it read, and the target; "" closes the connection.
type Picker func(ctx context.Context, c net.Conn) (net.Conn, string)

// Relay forwards connections for one layer ("l4" or "egress") and tracks
// them so shutdown can drain.
type Relay struct {
	layer   string
	dial    DialFunc
	metrics *metrics.Metrics
	log     *log.Logger
	active  sync.WaitGroup
}

// NewRelay returns a relay that dials targets with dial.
func NewRelay(layer string, dial DialFunc, m *metrics.Metrics, logger *log.Logger) *Relay {
	return &Relay{layer: layer, dial: dial, metrics: m, log: logger}
}

// dialTimeout bounds a dial to a target that does not answer.
const dialTimeout = 10 * time.Second

// ServeTCP accepts connections until ln is closed and relays each to
// target. Open connections keep running until they end or ctx is done.
func (r *Relay) ServeTCP(ctx context.Context, ln net.Listener, target TargetFunc) {
	r.ServeTCPPick(ctx, ln, func(_ context.Context, c net.Conn) (net.Conn, string) { return c, target() })
}

// ServeTCPPick is ServeTCP with a target chosen per connection by pick.
func (r *Relay) ServeTCPPick(ctx context.Context, ln net.Listener, pick Picker) {
	for {
		c, err := ln.Accept()
		if err != nil {
			if !errors.Is(err, net.ErrClosed) {
				r.log.Warn("accept failed; listener stopped", "listener", ln.Addr(), "err", err)
			}
			return
		}
		r.active.Add(1)
		go func() {
			defer r.active.Done()
			conn, target := pick(ctx, c)
			if target == "" {
				r.log.Debug("no target for the connection; closing it", "layer", r.layer, "remote", c.RemoteAddr())
				conn.Close()
				return
			}
			r.relayTCP(ctx, conn, target)
		}()
	}
}

// Wait blocks until every relayed connection and flow has ended or ctx is done.
func (r *Relay) Wait(ctx context.Context) error {
	done := make(chan struct{})
	go func() { r.active.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (r *Relay) relayTCP(ctx context.Context, client net.Conn, target string) {
	defer client.Close()
	gauge := r.metrics.ActiveConnections.WithLabelValues(r.layer)
	gauge.Inc()
	defer gauge.Dec()
	dctx, cancel := context.WithTimeout(ctx, dialTimeout)
	upstream, err := r.dial(dctx, "tcp", target)
	cancel()
	if err != nil {
		r.metrics.UpstreamErrors.WithLabelValues(target).Inc()
		r.log.Warn("dial target failed", "layer", r.layer, "target", target, "err", err)
		return
	}
	defer upstream.Close()
	// A hard stop (ctx done) closes both sides; a graceful drain waits.
	stop := context.AfterFunc(ctx, func() { client.Close(); upstream.Close() })
	defer stop()
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); r.pipe(upstream, client, "in") }()
	go func() { defer wg.Done(); r.pipe(client, upstream, "out") }()
	wg.Wait()
}

// pipe copies src to dst, then half-closes dst so the other side sees EOF
// while the reverse direction keeps flowing.
func (r *Relay) pipe(dst, src net.Conn, direction string) {
	n, _ := io.Copy(dst, src)
	r.metrics.Bytes.WithLabelValues(r.layer, direction).Add(float64(n))
	if cw, ok := dst.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	} else {
		_ = dst.Close()
	}
}
