package proxy

// Recent peers: recorded in the state Secret, primed by the next process.
//
// tailscale.com v1.102.5's magicsock keeps sending to a peer's last direct
// UDP path for up to 6.5 s (trustUDPAddrDuration) after the peer's disco
// key changed, that is after the peer's process restarted with the same
// node key: a client's first WireGuard handshake to the new process goes to
// the old process's dead socket, and WireGuard retries only after 5 s
// (upstream restored a reset on disco-key change later,
// tailscale/tailscale#20368). A handshake that reaches the peer while it
// reconfigures WireGuard for the new disco key is lost too (measured in
// TestRestartedProxyReachedAtOnce, not traced in tailscale.com). A
// ProxyGroup replica that takes over a Tailscale Service soon after its
// restart made clients wait that long.
//
// So a proxy records the peers it had WireGuard sessions with (while it
// runs, so that a killed process leaves a list too, and when it stops),
// and its next process pings each of them over WireGuard (TSMP) before it
// reports ready: first a disco ping, for which the new process, having no
// path to the peer yet, sends it a call-me-maybe with its new endpoints
// through DERP, which makes the peer drop the old process's endpoint and
// confirm a new path; then a TSMP ping, whose WireGuard handshake sets up
// over that path the session the peer's next packet uses.

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"time"

	"tailscale.com/client/local"
	"tailscale.com/ipn/ipnstate"
	"tailscale.com/tailcfg"
)

const (
	// peerRecordInterval is Options.PeerRecordInterval's default.
	peerRecordInterval = 10 * time.Second
	// recentPeerWindow is how young a peer's last WireGuard handshake is
	// for it to count as recent (a session in use handshakes again every
	// 2 minutes).
	recentPeerWindow = 5 * time.Minute
	// maxRecentPeers bounds the list, and so the pings at start; the
	// peers with the latest handshakes are kept.
	maxRecentPeers = 64
	// primeTimeout bounds the pings at start: a recorded peer that is
	// gone never holds readiness back longer. It leaves room for one
	// WireGuard handshake retry (5 s after the first), for a peer that
	// lost the first handshake while it reconfigured for the new disco
	// key.
	primeTimeout = 6 * time.Second
	// primeSettle is the pause between a peer's disco pong and the
	// WireGuard handshake of the TSMP ping.
	primeSettle = 500 * time.Millisecond
	// primeParallel is how many peers are pinged at once.
	primeParallel = 16
)

// peerState is the engine's part of recording recent peers.
type peerState struct {
	mu       sync.Mutex // one read-and-record at a time
	recorded []string   // what was recorded last; nil before
	written  bool       // recorded holds a write of this process
}

// recentPeers returns the tailnet addresses (one per peer, IPv4 when it
// has one) of the peers of st with a WireGuard handshake within
// recentPeerWindow of now, or an active session: at most maxRecentPeers,
// the latest handshakes first, then sorted.
func recentPeers(st *ipnstate.Status, now time.Time) []string {
	type peer struct {
		addr string
		hs   time.Time
	}
	var ps []peer
	for _, p := range st.Peer {
		if p == nil || len(p.TailscaleIPs) == 0 {
			continue
		}
		recent := !p.LastHandshake.IsZero() && now.Sub(p.LastHandshake) < recentPeerWindow
		if !recent && !p.Active {
			continue
		}
		addr := p.TailscaleIPs[0]
		for _, a := range p.TailscaleIPs {
			if a.Is4() {
				addr = a
				break
			}
		}
		ps = append(ps, peer{addr.String(), p.LastHandshake})
	}
	slices.SortFunc(ps, func(a, b peer) int { return b.hs.Compare(a.hs) })
	out := make([]string, 0, min(len(ps), maxRecentPeers))
	for i := 0; i < len(ps) && i < maxRecentPeers; i++ {
		out = append(out, ps[i].addr)
	}
	slices.Sort(out)
	return out
}

// statusFunc reads a node's status with its peers (local.Client.Status).
type statusFunc func(ctx context.Context) (*ipnstate.Status, error)

// recordPeers reads the node's peers and records the recent ones when
// they differ from what was recorded last.
func (e *Engine) recordPeers(ctx context.Context, status statusFunc) error {
	if e.opts.Peers == nil {
		return nil
	}
	e.peers.mu.Lock()
	defer e.peers.mu.Unlock()
	st, err := status(ctx)
	if err != nil {
		return fmt.Errorf("recent peers: read the node's status: %w", err)
	}
	peers := recentPeers(st, time.Now())
	if e.peers.written && slices.Equal(peers, e.peers.recorded) {
		return nil
	}
	if err := e.opts.Peers.SetRecentPeers(ctx, peers); err != nil {
		return fmt.Errorf("recent peers: %w", err)
	}
	e.peers.recorded, e.peers.written = peers, true
	return nil
}

// watchPeers primes the peers the previous process recorded, then records
// the recent peers every PeerRecordInterval until the node stops.
func (e *Engine) watchPeers(lc *local.Client) {
	if e.opts.Peers == nil {
		return
	}
	if e.priming.Load() {
		e.primePeers(lc, e.opts.Peers.RecentPeers())
		e.priming.Store(false)
	}
	tick := time.NewTicker(e.opts.PeerRecordInterval)
	defer tick.Stop()
	for {
		select {
		case <-e.nodeDone:
			return
		case <-tick.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if err := e.recordPeers(ctx, lc.Status); err != nil {
			e.log.Warn("cannot record the recent peers", "err", err)
		}
		cancel()
	}
}

// recordPeersAtStop records the recent peers once more before the node
// closes.
func (e *Engine) recordPeersAtStop() {
	if e.opts.Peers == nil || e.node == nil {
		return
	}
	lc, err := e.node.LocalClient()
	if err != nil {
		e.log.Warn("cannot record the recent peers before stopping", "err", err)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if err := e.recordPeers(ctx, lc.Status); err != nil {
		e.log.Warn("cannot record the recent peers before stopping", "err", err)
	}
}

// primePeers pings every peer in addrs, with disco then over WireGuard
// (TSMP), in parallel and for primeTimeout at most in all; failures are
// only logged.
func (e *Engine) primePeers(lc *local.Client, addrs []string) {
	if len(addrs) == 0 {
		return
	}
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), primeTimeout)
	defer cancel()
	stop := context.AfterFunc(e.hard, cancel) // a stop does not wait for the pings
	defer stop()
	sem := make(chan struct{}, primeParallel)
	var wg sync.WaitGroup
	var mu sync.Mutex
	reached := 0
	for _, s := range addrs {
		ip, err := netip.ParseAddr(s)
		if err != nil {
			e.log.Debug("recent peers: not an address", "peer", s)
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case sem <- struct{}{}:
				defer func() { <-sem }()
			case <-ctx.Done():
				return
			}
			// Disco first: it tells the peer the new endpoints (so it
			// drops the dead path) and confirms a path; then TSMP, whose
			// WireGuard handshake takes that path.
			for _, kind := range []tailcfg.PingType{tailcfg.PingDisco, tailcfg.PingTSMP} {
				res, err := lc.Ping(ctx, ip, kind)
				if err == nil && res.Err != "" {
					err = fmt.Errorf("%s", res.Err)
				}
				if err != nil {
					e.log.Debug("recent peer not reached", "peer", ip, "ping", kind, "err", err)
					return
				}
				if kind == tailcfg.PingDisco {
					// The peer reconfigures WireGuard for the new disco
					// key after its netmap update; a handshake before
					// that is lost.
					select {
					case <-time.After(primeSettle):
					case <-ctx.Done():
						return
					}
				}
			}
			mu.Lock()
			reached++
			mu.Unlock()
		}()
	}
	wg.Wait()
	e.log.Info("pinged the previous process's recent peers before reporting ready", "peers", len(addrs), "reached", reached, "took", time.Since(start).Round(time.Millisecond))
}
