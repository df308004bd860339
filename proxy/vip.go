package proxy

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"sync"
	"time"

	"tailscale.com/ipn"
	"tailscale.com/tailcfg"
	"tailscale.com/tsnet"
)

// vipMap is the Tailscale Services control assigned to this node (the
// node's service-host capability): each service's addresses, and back.
type vipMap struct {
	byService map[string][]netip.Addr
	byAddr    map[netip.Addr]string
}

func (m *vipMap) equal(o *vipMap) bool {
	if m == nil || o == nil {
		return m == o
	}
	if len(m.byService) != len(o.byService) {
		return false
	}
	for k, v := range m.byService {
		if !slices.Equal(v, o.byService[k]) {
			return false
		}
	}
	return true
}

func newVIPMap(m tailcfg.ServiceIPMappings) *vipMap {
	v := &vipMap{byService: map[string][]netip.Addr{}, byAddr: map[netip.Addr]string{}}
	for svc, addrs := range m {
		addrs = slices.Clone(addrs)
		slices.SortFunc(addrs, func(a, b netip.Addr) int { return a.Compare(b) })
		v.byService[string(svc)] = addrs
		for _, a := range addrs {
			v.byAddr[a] = string(svc)
		}
	}
	return v
}

// serviceIPMappings reads the service-host capability, as
// netmap.GetVIPServiceIPMap does.
func serviceIPMappings(caps tailcfg.NodeCapMap) tailcfg.ServiceIPMappings {
	ms, err := tailcfg.UnmarshalNodeCapJSON[tailcfg.ServiceIPMappings](caps, tailcfg.NodeAttrServiceHost)
	if err != nil || len(ms) != 1 {
		return nil
	}
	return ms[0]
}

// watchVIPs follows the node's own tailnet node and keeps e.vips current, waking the
// Run loop when it changes: a service's addresses arrive (or change) when
// control assigns it, after this node advertised it.
func (e *Engine) watchVIPs(node *tsnet.Server) {
	lc, err := node.LocalClient()
	if err != nil {
		e.log.Error("no local client; Tailscale Service addresses will not be followed", "err", err)
		return
	}
	ctx, cancel := context.WithCancel(e.hard)
	defer cancel()
	go func() {
		select {
		case <-e.nodeDone:
		case <-ctx.Done():
		}
		cancel()
	}()
	for ctx.Err() == nil {
		w, err := lc.WatchIPNBus(ctx, ipn.NotifyInitialStatus)
		if err != nil {
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Second):
				continue
			}
		}
		for {
			n, err := w.Next()
			if err != nil {
				break
			}
			var caps tailcfg.NodeCapMap
			switch {
			case n.InitialStatus != nil && n.InitialStatus.Self != nil:
				caps = n.InitialStatus.Self.CapMap
			case n.SelfChange != nil:
				caps = n.SelfChange.CapMap
			default:
				continue
			}
			m := newVIPMap(serviceIPMappings(caps))
			if !m.equal(e.vips.Load()) {
				e.vips.Store(m)
				e.log.Debug("Tailscale Service addresses changed", "services", m.byService)
				e.wakeGroup()
			}
		}
		w.Close()
	}
}

// wakeGroup asks the Run loop to re-evaluate what the ingress-group role
// serves and advertises (non-blocking: one pending wake is enough).
func (e *Engine) wakeGroup() {
	select {
	case e.groupWake <- struct{}{}:
	default:
	}
}

// connListener is a net.Listener fed with connections that netstack's flow
// hook hands over: a Tailscale Service port, on whichever of the service's
// addresses the client used.
type connListener struct {
	addr  net.Addr
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

func newConnListener(name string) *connListener {
	return &connListener{addr: addr{"tcp", name}, conns: make(chan net.Conn), done: make(chan struct{})}
}

func (l *connListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *connListener) Close() error   { l.once.Do(func() { close(l.done) }); return nil }
func (l *connListener) Addr() net.Addr { return l.addr }

// deliver hands c to the listener's server; a closed or stuck listener
// closes it instead (the client sees a reset rather than a hang).
func (l *connListener) deliver(c net.Conn) {
	t := time.NewTimer(5 * time.Second)
	defer t.Stop()
	select {
	case l.conns <- c:
		return
	case <-l.done:
	case <-t.C:
	}
	c.Close()
}

type addr struct{ network, s string }

func (a addr) Network() string { return a.network }
func (a addr) String() string  { return a.s }

// vipPort names one TCP port of one Tailscale Service.
type vipPort struct {
	service string
	port    uint16
}

// registerVIP makes ln receive the service port's connections.
func (e *Engine) registerVIP(k vipPort, ln *connListener) {
	e.vipMu.Lock()
	defer e.vipMu.Unlock()
	e.vipTCP[k] = ln
}

func (e *Engine) unregisterVIP(k vipPort, ln *connListener) {
	e.vipMu.Lock()
	defer e.vipMu.Unlock()
	if e.vipTCP[k] == ln {
		delete(e.vipTCP, k)
	}
}

// vipHandler returns the handler for a TCP flow to a Tailscale Service
// address this node serves, or nil. The lookup is by destination address
// (any of the service's IPv4 and IPv6 addresses) and port.
func (e *Engine) vipHandler(dst netip.AddrPort) func(net.Conn) {
	m := e.vips.Load()
	if m == nil {
		return nil
	}
	svc, ok := m.byAddr[dst.Addr()]
	if !ok {
		return nil
	}
	e.vipMu.Lock()
	ln := e.vipTCP[vipPort{svc, dst.Port()}]
	e.vipMu.Unlock()
	if ln == nil {
		return nil
	}
	return ln.deliver
}

// advertiseServices makes the node advertise exactly names (sorted) as
// Tailscale Services, with tcpPorts as the ports it serves for each, in
// one prefs edit (as tsnet.ListenService does for one service). The serve
// config's per-service TCP entries carry no handler: they only make
// tailscaled intercept those ports on the service addresses, so that
// netstack hands each connection to the node's flow hook (vipHandler)
// instead of dropping the packets; they also tell control which ports the
// node serves.
func (e *Engine) advertiseServices(ctx context.Context, names []string, tcpPorts map[string][]uint16) error {
	lc, err := e.node.LocalClient()
	if err != nil {
		return fmt.Errorf("advertise Tailscale Services: %w", err)
	}
	sc := &ipn.ServeConfig{}
	for _, n := range names {
		svc := &ipn.ServiceConfig{TCP: map[uint16]*ipn.TCPPortHandler{}}
		for _, p := range tcpPorts[n] {
			svc.TCP[p] = &ipn.TCPPortHandler{}
		}
		if sc.Services == nil {
			sc.Services = map[tailcfg.ServiceName]*ipn.ServiceConfig{}
		}
		sc.Services[tailcfg.ServiceName(n)] = svc
	}
	// Serve config first when adding (the ports are intercepted before
	// control sends clients), prefs first when withdrawing (control stops
	// sending clients before the ports close).
	setServe := func() error {
		if err := lc.SetServeConfig(ctx, sc); err != nil {
			return fmt.Errorf("set serve config for Tailscale Services %v: %w", names, err)
		}
		return nil
	}
	setPrefs := func() error {
		mp := &ipn.MaskedPrefs{Prefs: ipn.Prefs{AdvertiseServices: append([]string{}, names...)}, AdvertiseServicesSet: true}
		if _, err := lc.EditPrefs(ctx, mp); err != nil {
			return fmt.Errorf("advertise Tailscale Services %v: %w", names, err)
		}
		return nil
	}
	adding := len(names) >= len(e.servicesAdvertised)
	steps := []func() error{setServe, setPrefs}
	if !adding {
		steps = []func() error{setPrefs, setServe}
	}
	var errs []error
	for _, s := range steps {
		errs = append(errs, s())
	}
	return errors.Join(errs...)
}
