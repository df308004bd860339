package l4

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// maxDatagram is the largest UDP payload relayed.
const maxDatagram = 64 * 1024

// ServeUDP relays datagrams from pc to target, one upstream socket per
// client address, until pc is closed or ctx is done. A flow without packets
// in either direction for idle is closed. UDP has no end of a session to
// wait for, so flows end with the listener: closing pc or ending ctx closes
// every flow at once, and a shutdown never waits for flows to go idle.
func (r *Relay) ServeUDP(ctx context.Context, pc net.PacketConn, target TargetFunc, idle time.Duration) {
	var (
		mu    sync.Mutex
		flows = map[string]*udpFlow{}
	)
	// A read blocked in pc does not watch ctx: closing pc ends it, and the
	// deferred cleanup below then closes the flows.
	stop := context.AfterFunc(ctx, func() { pc.Close() })
	defer stop()
	defer func() {
		mu.Lock()
		for _, f := range flows {
			f.conn.Close()
		}
		mu.Unlock()
	}()
	buf := make([]byte, maxDatagram)
	for {
		n, src, err := pc.ReadFrom(buf)
		if err != nil {
			// tsnet reports a closed packet listener as EOF.
			if !errors.Is(err, net.ErrClosed) && !errors.Is(err, io.EOF) && ctx.Err() == nil {
				r.log.Warn("udp read failed; listener stopped", "listener", pc.LocalAddr(), "err", err)
			}
			return
		}
		key := src.String()
		mu.Lock()
		f := flows[key]
		mu.Unlock()
		if f == nil {
			dst := target()
			dctx, cancel := context.WithTimeout(ctx, dialTimeout)
			conn, err := r.dial(dctx, "udp", dst)
			cancel()
			if err != nil {
				r.metrics.UpstreamErrors.WithLabelValues(dst).Inc()
				r.log.Warn("dial udp target failed", "layer", r.layer, "target", dst, "err", err)
				continue
			}
			f = &udpFlow{conn: conn}
			f.touch()
			mu.Lock()
			flows[key] = f
			mu.Unlock()
			r.active.Add(1)
			go func() {
				defer r.active.Done()
				r.replies(pc, src, f, idle)
				mu.Lock()
				delete(flows, key)
				mu.Unlock()
			}()
		}
		f.touch()
		if _, err := f.conn.Write(buf[:n]); err != nil {
			r.log.Debug("udp write to target failed", "layer", r.layer, "err", err)
			continue
		}
		r.metrics.Bytes.WithLabelValues(r.layer, "in").Add(float64(n))
	}
}

type udpFlow struct {
	conn net.Conn
	last atomic.Int64 // unix nanos of the last packet either way
}

func (f *udpFlow) touch() { f.last.Store(time.Now().UnixNano()) }

// replies copies the target's answers back to the client until the flow
// has been idle for idle.
func (r *Relay) replies(pc net.PacketConn, client net.Addr, f *udpFlow, idle time.Duration) {
	gauge := r.metrics.ActiveConnections.WithLabelValues(r.layer)
	gauge.Inc()
	defer gauge.Dec()
	defer f.conn.Close()
	buf := make([]byte, maxDatagram)
	for {
		deadline := time.Unix(0, f.last.Load()).Add(idle)
		if !time.Now().Before(deadline) {
			return
		}
		_ = f.conn.SetReadDeadline(deadline)
		n, err := f.conn.Read(buf)
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue // re-check: a client packet may have extended the flow
			}
			return
		}
		f.touch()
		if _, err := pc.WriteTo(buf[:n], client); err != nil {
			return
		}
		r.metrics.Bytes.WithLabelValues(r.layer, "out").Add(float64(n))
	}
}
