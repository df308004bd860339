package proxy

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"time"

	"tailscale.com/tailcfg"
	"tailscale.com/tsnet"

	"github.com/tailplane/tailplane/proxy/config"
	"github.com/tailplane/tailplane/proxy/l4"
	"github.com/tailplane/tailplane/proxy/l7"
)

// listenerHandle is one open listener and how to stop it.
type listenerHandle struct {
	// shutdown stops accepting and lets open connections finish (up to ctx).
	shutdown func(ctx context.Context)
	// kill ends the connections still open.
	kill func()
}

// listenerSpec describes a listener a config wants; its key is stable
// across reloads, so an unchanged listener is kept open.
type listenerSpec struct {
	key    string
	target string // L4/egress target; "" for L7
	// service is the Tailscale Service the listener serves (ingress-group
	// role): its failure to open keeps that service from being advertised
	// instead of refusing the config.
	service string
	open    func() (*listenerHandle, error)
}

// apply switches to cfg: it opens the listeners cfg adds, swaps routes and
// targets atomically, then closes the listeners cfg drops. A listener that
// cannot open (Funnel the tailnet does not allow, a port taken) does not
// hold back the rest: cfg applies without it, and skipped says which did
// not open, so that they are tried again. If anything else fails, or no
// listener of cfg would serve, everything new is closed and the previous
// config (if any) stays in force.
func (e *Engine) apply(ctx context.Context, cfg *config.Config) (skipped, err error) {
	sf, err := newSourceFilter(cfg.AllowedSourceRanges)
	if err != nil {
		return nil, err
	}
	var routes *l7.Routes
	var certs certSource
	if cfg.L7 != nil {
		if certs, err = e.loadCertSource(ctx, "l7.tls", cfg.L7.TLS); err != nil {
			return nil, err
		}
		if routes, err = e.buildRoutes(ctx, cfg); err != nil {
			return nil, err
		}
	}
	var gateway *gatewayPlan
	if cfg.Gateway != nil {
		if gateway, err = e.planGateway(ctx, cfg); err != nil {
			return nil, err
		}
	}
	var plan *groupPlan
	specs := e.specs(cfg)
	if isGroupRole(cfg.Role) {
		if plan, err = e.planGroup(ctx, cfg); err != nil {
			return nil, err
		}
		specs = e.groupSpecs(cfg, plan.services)
	}
	if e.current != nil && e.current.Role != cfg.Role {
		// A new role may need the ports the old one holds: stop the old
		// listeners first (a role change interrupts service briefly).
		e.log.Info("role change; closing the previous role's listeners", "from", e.current.Role, "to", cfg.Role)
		if isGroupRole(e.current.Role) {
			e.withdrawServices()
		}
		// Connections of the old role must not linger either.
		sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		for k, h := range e.listen {
			delete(e.listen, k)
			h.shutdown(sctx)
			h.kill()
		}
		cancel()
	}
	opened, failed, skipped := e.openListeners(ctx, specs)
	if skipped != nil && !e.anyServes(specs, opened) {
		closeListeners(ctx, opened)
		return nil, skipped
	}
	// Point of no return: swap state, then adjust the listener set.
	e.sources.Store(sf)
	if certs != nil {
		e.certs.Store(&certs)
	}
	if routes != nil {
		e.l7.SetRoutes(routes)
		e.plainHTTP.Store(cfg.L7.PlainHTTP)
		e.warmCert(cfg)
	}
	if gateway != nil {
		e.commitGateway(gateway)
	}
	if plan != nil {
		e.commitGroup(cfg, plan, failed)
	} else {
		e.leaveGroup()
	}
	e.adoptListeners(specs, opened)
	return skipped, nil
}

// openListeners opens the listeners of specs that are not open yet. A
// failing Tailscale Service listener is reported in failed by service; the
// failures of the others are joined in skipped.
func (e *Engine) openListeners(_ context.Context, specs []listenerSpec) (opened map[string]*listenerHandle, failed map[string]error, skipped error) {
	opened = map[string]*listenerHandle{}
	failed = map[string]error{}
	var errs []error
	for _, s := range specs {
		if _, ok := e.listen[s.key]; ok {
			continue
		}
		if s.service != "" && failed[s.service] != nil {
			continue
		}
		h, err := s.open()
		if err != nil && s.service != "" {
			failed[s.service] = fmt.Errorf("open listener %s: %w", s.key, err)
			continue
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("open listener %s: %w", s.key, err))
			continue
		}
		opened[s.key] = h
	}
	return opened, failed, errors.Join(errs...)
}

// anyServes reports whether one listener of specs other than a Tailscale
// Service's is open already or in opened: what a config with failed
// listeners still serves.
func (e *Engine) anyServes(specs []listenerSpec, opened map[string]*listenerHandle) bool {
	for _, s := range specs {
		if s.service != "" {
			continue
		}
		if _, ok := e.listen[s.key]; ok {
			return true
		}
		if _, ok := opened[s.key]; ok {
			return true
		}
	}
	return false
}

// closeListeners stops listeners at once, their connections too.
func closeListeners(ctx context.Context, hs map[string]*listenerHandle) {
	for _, h := range hs {
		h.shutdown(ctx)
		h.kill()
	}
}

// adoptListeners makes specs the listener set: their targets swap in, the
// opened listeners join, and those specs no longer want close gracefully.
func (e *Engine) adoptListeners(specs []listenerSpec, opened map[string]*listenerHandle) {
	targets := map[string]string{}
	wanted := map[string]bool{}
	for _, s := range specs {
		wanted[s.key] = true
		if s.target != "" {
			targets[s.key] = s.target
		}
	}
	e.targets.Store(&targets)
	for k, h := range opened {
		e.listen[k] = h
	}
	for k, h := range e.listen {
		if !wanted[k] {
			delete(e.listen, k)
			go h.shutdown(context.Background())
		}
	}
}

// specs lists the listeners cfg wants (the ingress-group role's come from
// groupSpecs).
func (e *Engine) specs(cfg *config.Config) []listenerSpec {
	var out []listenerSpec
	switch cfg.Role {
	case config.RoleIngressL7:
		l := cfg.L7
		if l.TLS.EffectiveMode() != config.TLSNone {
			out = append(out, listenerSpec{key: "l7/tailnet/tcp/443", open: func() (*listenerHandle, error) {
				ln, err := e.node.Listen("tcp", ":443")
				if err != nil {
					return nil, err
				}
				return e.serveHTTP(tls.NewListener(e.filter(ln), e.tlsConfig()), e.l7.Listener(false)), nil
			}})
		}
		// One :80 listener whatever its mode, so switching between
		// redirect and plain HTTP never needs a second listener on the port.
		if l.HTTPRedirect || l.PlainHTTP {
			redirect, plain := l7.RedirectHandler(), e.l7.Listener(false)
			handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if e.plainHTTP.Load() {
					plain.ServeHTTP(w, r)
				} else {
					redirect.ServeHTTP(w, r)
				}
			})
			out = append(out, listenerSpec{key: "l7/tailnet/tcp/80", open: func() (*listenerHandle, error) {
				ln, err := e.node.Listen("tcp", ":80")
				if err != nil {
					return nil, err
				}
				return e.serveHTTP(e.filter(ln), handler), nil
			}})
		}
		if l.Funnel {
			out = append(out, e.funnelSpec())
		}
	case config.RoleIngressL4:
		for _, p := range cfg.L4.Ports {
			out = append(out, e.l4Specs(p, idle(cfg.L4.UDPIdleTimeoutSeconds))...)
		}
	case config.RoleGateway:
		out = e.gatewaySpecs(cfg)
	case config.RoleEgress:
		for _, t := range cfg.Egress.Targets {
			for _, p := range t.Ports {
				out = append(out, e.egressSpec(t, p, idle(cfg.Egress.UDPIdleTimeoutSeconds)))
			}
		}
	}
	return out
}

func idle(seconds int) time.Duration {
	if seconds <= 0 {
		return 60 * time.Second
	}
	return time.Duration(seconds) * time.Second
}

// funnelSpec serves the ingress-l7 role's public side on port 443.
func (e *Engine) funnelSpec() listenerSpec {
	return e.funnelSpecFor("l7", 443, e.tlsConfig(), e.l7.Listener(true))
}

// funnelSpecFor serves h publicly on port with tlsCfg: tsnet's Funnel, or
// the configured public address where the control server has no Funnel.
// Either way the node must have the funnel node attribute (the tailnet
// policy's nodeAttrs), and h must mark requests public. prefix starts the
// listener's key ("l7", "gateway").
func (e *Engine) funnelSpecFor(prefix string, port int, tlsCfg *tls.Config, h http.Handler) listenerSpec {
	if e.opts.PublicAddr != "" {
		return listenerSpec{key: prefix + "/public/" + e.opts.PublicAddr, open: func() (*listenerHandle, error) {
			if err := e.funnelAllowed(); err != nil {
				return nil, fmt.Errorf("funnel: %w", err)
			}
			ln, err := net.Listen("tcp", e.opts.PublicAddr)
			if err != nil {
				return nil, err
			}
			return e.serveHTTP(tls.NewListener(ln, tlsCfg), h), nil
		}}
	}
	return listenerSpec{key: prefix + "/funnel/tcp/" + strconv.Itoa(port), open: func() (*listenerHandle, error) {
		ln, err := e.node.ListenFunnel("tcp", ":"+strconv.Itoa(port), tsnet.FunnelOnly(), tsnet.FunnelTLSConfig(tlsCfg))
		if err != nil {
			return nil, fmt.Errorf("funnel: %w", err)
		}
		return e.serveHTTP(ln, h), nil
	}}
}

// noFunnel is tsnet's ListenFunnel error for a node without the funnel
// attribute, which the operator recognizes.
const noFunnel = `Funnel not available; "funnel" node attribute not set. See https://tailscale.com/s/no-funnel.`

// funnelAllowed checks, as tsnet's ListenFunnel does, that control gave
// the node the funnel attribute, so the public stand-in follows the
// tailnet policy as Funnel would.
func (e *Engine) funnelAllowed() error {
	lc, err := e.node.LocalClient()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := lc.StatusWithoutPeers(ctx)
	if err != nil {
		return fmt.Errorf("read the node's status: %w", err)
	}
	if st.Self == nil || !st.Self.HasCap(tailcfg.NodeAttrFunnel) {
		return fmt.Errorf("the node lacks the funnel attribute: %s", noFunnel)
	}
	return nil
}

func (e *Engine) l4Specs(p config.PortMap, idle time.Duration) []listenerSpec {
	port := strconv.Itoa(p.Port)
	if p.EffectiveProtocol() == config.TCP {
		key := "l4/tailnet/tcp/" + port
		return []listenerSpec{{key: key, target: p.Target, open: func() (*listenerHandle, error) {
			ln, err := e.node.Listen("tcp", ":"+port)
			if err != nil {
				return nil, err
			}
			return e.serveTCP(e.ingress, e.filter(ln), key), nil
		}}}
	}
	var out []listenerSpec
	ip4, ip6 := e.node.TailscaleIPs()
	for _, ip := range []string{ip4.String(), ip6.String()} {
		if ip == "invalid IP" {
			continue
		}
		key := "l4/tailnet/udp/" + net.JoinHostPort(ip, port)
		out = append(out, listenerSpec{key: key, target: p.Target, open: func() (*listenerHandle, error) {
			pc, err := e.node.ListenPacket("udp", net.JoinHostPort(ip, port))
			if err != nil {
				return nil, err
			}
			return e.serveUDP(e.ingress, pc, key, idle), nil
		}})
	}
	return out
}

func (e *Engine) egressSpec(t config.EgressTarget, p config.PortMap, idle time.Duration) listenerSpec {
	targetPort := p.TargetPort
	if targetPort == 0 {
		targetPort = p.Port
	}
	target := net.JoinHostPort(t.Address(), strconv.Itoa(targetPort))
	addr := net.JoinHostPort(e.opts.EgressHost, strconv.Itoa(p.Port))
	if p.EffectiveProtocol() == config.UDP {
		key := "egress/pod/udp/" + addr
		return listenerSpec{key: key, target: target, open: func() (*listenerHandle, error) {
			pc, err := net.ListenPacket("udp", addr)
			if err != nil {
				return nil, err
			}
			return e.serveUDP(e.egress, pc, key, idle), nil
		}}
	}
	key := "egress/pod/tcp/" + addr
	return listenerSpec{key: key, target: target, open: func() (*listenerHandle, error) {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return nil, err
		}
		return e.serveTCP(e.egress, ln, key), nil
	}}
}

func (e *Engine) target(key string) l4.TargetFunc {
	return func() string { return (*e.targets.Load())[key] }
}

func (e *Engine) serveTCP(r *l4.Relay, ln net.Listener, key string) *listenerHandle {
	ctx, cancel := context.WithCancel(e.hard)
	go r.ServeTCP(ctx, ln, e.target(key))
	return &listenerHandle{shutdown: func(context.Context) { ln.Close() }, kill: cancel}
}

func (e *Engine) serveUDP(r *l4.Relay, pc net.PacketConn, key string, idle time.Duration) *listenerHandle {
	ctx, cancel := context.WithCancel(e.hard)
	go r.ServeUDP(ctx, pc, e.target(key), idle)
	// Nothing to drain: a UDP flow never ends by itself, so its listener's
	// shutdown ends its flows too rather than holding the drain until they
	// go idle.
	return &listenerHandle{shutdown: func(context.Context) { cancel() }, kill: cancel}
}
