package proxy

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"slices"
	"strconv"

	"github.com/charmbracelet/log"

	"github.com/tailplane/tailplane/proxy/config"
	"github.com/tailplane/tailplane/proxy/gatewaytable"
	"github.com/tailplane/tailplane/proxy/l4"
	"github.com/tailplane/tailplane/proxy/l7"
	"github.com/tailplane/tailplane/proxy/route"
)

// gatewayPlan is what one gateway config serves (config.RoleGateway), by
// listener port, built before the config applies and immutable after: the
// listeners read the current plan on every request or connection, so a
// reload changes routes without reopening them.
type gatewayPlan struct {
	routes map[int]*l7.Routes // HTTP and HTTPS ports
	certs  map[int]*portCerts // HTTPS ports
	// funnelCerts are the certificates of the HTTPS listeners exposed
	// through Funnel only: a public client naming another listener's
	// host gets no certificate.
	funnelCerts map[int]*portCerts
	sni         map[int]*gatewaytable.SNITable // TLS passthrough ports
	splits      map[gatewayPort]*gatewaytable.Split
}

// gatewayPort is a group of listeners sharing a port (and, validation
// checked, a protocol; a TCP and a UDP listener may share a number).
type gatewayPort struct {
	protocol config.ListenerProtocol
	port     int
}

// portCerts are the certificates of the HTTPS listeners sharing a port,
// chosen by SNI with the listeners' hostname precedence.
type portCerts struct {
	hosts gatewaytable.Hosts[certSource]
	// first serves handshakes without a server name that no listener
	// without a hostname takes (a client dialling the node's address).
	first certSource
}

// gatewayGroups groups the listeners by port, in config order.
func gatewayGroups(g *config.Gateway) ([]gatewayPort, map[gatewayPort][]config.Listener) {
	var order []gatewayPort
	groups := map[gatewayPort][]config.Listener{}
	for _, l := range g.Listeners {
		k := gatewayPort{l.Protocol, l.Port}
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], l)
	}
	return order, groups
}

// planGateway builds the plan of cfg's gateway section: route tables and
// router chains, certificates (a missing Secret refuses the config, as for
// Ingress), SNI tables and weighted splits.
func (e *Engine) planGateway(ctx context.Context, cfg *config.Config) (*gatewayPlan, error) {
	// Certificates first, as for Ingress: a Secret not there yet refuses
	// the config before any plugin loads.
	certs, funnelCerts, err := e.gatewayCerts(ctx, cfg.Gateway)
	if err != nil {
		return nil, err
	}
	// The plugin host runs one list for the whole proxy: load the union of
	// the config's and the rules' plugins once, and give each rule its
	// part (as a group replica does for its services).
	whole := config.Service{Name: "gateway", Gateway: cfg.Gateway, Plugins: cfg.Plugins}
	union, errs := pluginUnion([]config.Service{whole})
	if err := errs[whole.Name]; err != nil {
		return nil, err
	}
	routers, err := e.pluginRouters(ctx, union)
	if err != nil {
		return nil, err
	}
	global, err := servicePlugins(routers, cfg.Plugins, len(union))
	if err != nil {
		return nil, err
	}
	perEntry, err := entryPluginsWith(cfg.Gateway, func(ps []config.Plugin) ([]route.Router, error) {
		return servicePlugins(routers, ps, len(union))
	})
	if err != nil {
		return nil, err
	}
	plan := e.gatewayTables(cfg.Gateway, global, perEntry)
	plan.certs, plan.funnelCerts = certs, funnelCerts
	return plan, nil
}

// gatewayTables builds the plan of g without its certificates: route
// tables with their router chains (global after the table, then
// perEntry), SNI tables and weighted splits. The gateway role and the
// ingress-group role's Gateway services share it.
func (e *Engine) gatewayTables(g *config.Gateway, global []route.Router, perEntry entryRouters) *gatewayPlan {
	plan := &gatewayPlan{routes: map[int]*l7.Routes{}, sni: map[int]*gatewaytable.SNITable{}, splits: map[gatewayPort]*gatewaytable.Split{}}
	order, groups := gatewayGroups(g)
	for _, k := range order {
		ls := groups[k]
		switch k.protocol {
		case config.ListenerHTTP, config.ListenerHTTPS:
			table := gatewaytable.New(k.port, ls)
			chain := append(l7.Chain{table}, e.opts.ExtraRouters...)
			chain = append(chain, global...)
			if len(perEntry) > 0 {
				chain = append(chain, perEntry)
			}
			plan.routes[k.port] = &l7.Routes{Table: table, Routers: chain, HTTPSBackends: map[string]bool{}, H2CBackends: map[string]bool{}}
			noteBackends(plan.routes[k.port], ls)
		case config.ListenerTLS:
			plan.sni[k.port] = gatewaytable.NewSNITable(ls)
		default:
			plan.splits[k] = gatewaytable.NewSplit(ls[0].Backends)
		}
	}
	return plan
}

// noteBackends records which backends of ls are spoken to over TLS or h2c.
func noteBackends(r *l7.Routes, ls []config.Listener) {
	note := func(b config.Backend) {
		if b.HTTPS {
			r.HTTPSBackends[b.Address] = true
		}
		if b.H2C {
			r.H2CBackends[b.Address] = true
		}
	}
	for _, l := range ls {
		for _, hr := range l.HTTPRoutes {
			for _, b := range hr.Backends {
				note(b.Backend)
			}
			for _, m := range hr.Filters.Mirrors {
				note(m.Backend)
			}
		}
	}
}

// gatewayCerts loads the certificates of the HTTPS listeners by port: all
// of them, and those of the listeners exposed through Funnel.
func (e *Engine) gatewayCerts(ctx context.Context, g *config.Gateway) (all, funnel map[int]*portCerts, err error) {
	all, funnel = map[int]*portCerts{}, map[int]*portCerts{}
	add := func(m map[int]*portCerts, l config.Listener, src certSource) {
		pc := m[l.Port]
		if pc == nil {
			pc = &portCerts{first: src}
			m[l.Port] = pc
		}
		pc.hosts.Add(l.Hostname, src)
	}
	for i, l := range g.Listeners {
		if l.Protocol != config.ListenerHTTPS {
			continue
		}
		src, err := e.loadCertSource(ctx, fmt.Sprintf("gateway.listeners[%d].tls", i), *l.TLS)
		if err != nil {
			return nil, nil, err
		}
		add(all, l, src)
		if l.Funnel {
			add(funnel, l, src)
		}
	}
	return all, funnel, nil
}

// entryRouters runs each entry's own plugins (config.HTTPRoute.Plugins,
// the rule's ExtensionRef filters) after the table, by the route name the
// table matched.
type entryRouters map[string]l7.Chain

func (m entryRouters) Route(ctx context.Context, req *route.Request, prev route.Decision) (route.Decision, error) {
	if req.Route == nil {
		return prev, nil
	}
	chain, ok := m[req.Route.Name]
	if !ok {
		return prev, nil
	}
	return chain.Route(ctx, req, prev)
}

// entryPluginsWith makes the routers of every entry that names plugins,
// once per rule, with load.
func entryPluginsWith(g *config.Gateway, load func([]config.Plugin) ([]route.Router, error)) (entryRouters, error) {
	out := entryRouters{}
	for _, l := range g.Listeners {
		for _, r := range l.HTTPRoutes {
			if _, done := out[r.Name]; done || len(r.Plugins) == 0 {
				continue
			}
			rs, err := load(r.Plugins)
			if err != nil {
				return nil, fmt.Errorf("gateway route %s: %w", r.Name, err)
			}
			out[r.Name] = rs
		}
	}
	return out, nil
}

// commitGateway makes plan current: the HTTP handlers take its routes, the
// other listeners read it on their next connection.
func (e *Engine) commitGateway(plan *gatewayPlan) {
	e.gateway.Store(plan)
	for port, r := range plan.routes {
		e.gatewayHandler(port).SetRoutes(r)
	}
}

// gatewayHandler is the L7 handler of an HTTP(S) port, kept across
// reloads so that its listener stays open. Run goroutine only.
func (e *Engine) gatewayHandler(port int) *l7.Handler {
	return e.portHandler(e.gatewayHandlers, port, e.log)
}

// portHandler is the L7 handler of an HTTP(S) port in handlers, created
// on first use (logging with logger). Run goroutine only.
func (e *Engine) portHandler(handlers map[int]*l7.Handler, port int, logger *log.Logger) *l7.Handler {
	h := handlers[port]
	if h == nil {
		h = l7.NewHandler(e.whois, e.transport, e.metrics, logger.With("gatewayPort", port))
		handlers[port] = h
	}
	return h
}

// gatewaySpecs lists the gateway listeners: one per port (per tailnet
// address for UDP), keyed by protocol and port so that a reload keeps
// them open.
func (e *Engine) gatewaySpecs(cfg *config.Config) []listenerSpec {
	var out []listenerSpec
	order, groups := gatewayGroups(cfg.Gateway)
	publicTaken := false
	for _, k := range order {
		port := strconv.Itoa(k.port)
		key := "gateway/tailnet/" + string(k.protocol) + "/" + port
		listen := func(serve func(ln net.Listener) *listenerHandle) func() (*listenerHandle, error) {
			return func() (*listenerHandle, error) {
				ln, err := e.node.Listen("tcp", ":"+port)
				if err != nil {
					return nil, err
				}
				return serve(e.filter(ln)), nil
			}
		}
		if k.protocol != config.ListenerUDP {
			var h *l7.Handler
			if k.protocol == config.ListenerHTTP || k.protocol == config.ListenerHTTPS {
				h = e.gatewayHandler(k.port)
			}
			out = append(out, listenerSpec{key: key, open: listen(e.gatewayServe(k, h, e.gateway.Load))})
		}
		switch k.protocol {
		case config.ListenerHTTPS:
			if !slices.ContainsFunc(groups[k], func(l config.Listener) bool { return l.Funnel }) {
				continue
			}
			if e.opts.PublicAddr != "" && publicTaken {
				e.log.Warn("the public address serves one Funnel port; this one is served on the tailnet only", "port", k.port)
				continue
			}
			publicTaken = true
			out = append(out, e.funnelSpecFor("gateway", k.port, e.gatewayTLSConfig(k.port, true), e.gatewayHandler(k.port).Listener(true)))
		case config.ListenerUDP:
			out = append(out, e.gatewayUDPSpecs(k, key)...)
		}
	}
	return out
}

// gatewayServe serves a TCP port of k's protocol (HTTP, HTTPS, TLS or
// TCP) from the plan that load returns when a request or connection
// arrives, h being the port's L7 handler (HTTP and HTTPS). The gateway
// role serves its plan on the node's port with it, the ingress-group
// role a Gateway service's plan on the service's port.
func (e *Engine) gatewayServe(k gatewayPort, h *l7.Handler, load func() *gatewayPlan) func(net.Listener) *listenerHandle {
	switch k.protocol {
	case config.ListenerHTTP:
		hh := h.Listener(false)
		return func(ln net.Listener) *listenerHandle { return e.serveHTTPProtocols(ln, hh, true) }
	case config.ListenerHTTPS:
		hh, tlsCfg := h.Listener(false), e.gatewayTLSFrom(load, k.port, false)
		return func(ln net.Listener) *listenerHandle { return e.serveHTTP(tls.NewListener(ln, tlsCfg), hh) }
	case config.ListenerTLS:
		pick := e.passthroughPicker(load, k.port)
		return func(ln net.Listener) *listenerHandle { return e.servePick(ln, pick) }
	default:
		return func(ln net.Listener) *listenerHandle {
			return e.servePick(ln, func(_ context.Context, c net.Conn) (net.Conn, string) { return c, planTarget(load(), k) })
		}
	}
}

// gatewayTarget picks the backend address of a new TCP connection or UDP
// flow of k's listener by weight; "" (no backend, or an invalid one
// picked) drops it.
func (e *Engine) gatewayTarget(k gatewayPort) string {
	return planTarget(e.gateway.Load(), k)
}

// planTarget is gatewayTarget from plan.
func planTarget(plan *gatewayPlan, k gatewayPort) string {
	if plan == nil || plan.splits[k] == nil {
		return ""
	}
	b, ok := plan.splits[k].Pick()
	if !ok || b.Invalid {
		return ""
	}
	return b.Address
}

// gatewayUDPSpecs opens a UDP listener on each tailnet address, as the
// ingress-l4 role does.
func (e *Engine) gatewayUDPSpecs(k gatewayPort, key string) []listenerSpec {
	var out []listenerSpec
	ip4, ip6 := e.node.TailscaleIPs()
	for _, ip := range []string{ip4.String(), ip6.String()} {
		if ip == "invalid IP" {
			continue
		}
		addr := net.JoinHostPort(ip, strconv.Itoa(k.port))
		out = append(out, e.gatewayUDPSpec(key+"/"+addr, addr, func() string { return e.gatewayTarget(k) }))
	}
	return out
}

// gatewayUDPSpec is a UDP listener on addr whose flows go to the backend
// pick chooses when they start.
func (e *Engine) gatewayUDPSpec(key, addr string, pick func() string) listenerSpec {
	return listenerSpec{key: key, open: func() (*listenerHandle, error) {
		pc, err := e.node.ListenPacket("udp", addr)
		if err != nil {
			return nil, fmt.Errorf("UDP %s: %w", addr, err)
		}
		ctx, cancel := context.WithCancel(e.hard)
		go e.ingress.ServeUDP(ctx, pc, pick, idle(0))
		return &listenerHandle{shutdown: func(context.Context) { cancel() }, kill: cancel}, nil
	}}
}

// servePick relays ln's connections to the targets pick chooses.
func (e *Engine) servePick(ln net.Listener, pick l4.Picker) *listenerHandle {
	ctx, cancel := context.WithCancel(e.hard)
	go e.ingress.ServeTCPPick(ctx, ln, pick)
	return &listenerHandle{shutdown: func(context.Context) { ln.Close() }, kill: cancel}
}
