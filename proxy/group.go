package proxy

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/tailplane/tailplane/proxy/config"
	"github.com/tailplane/tailplane/proxy/l7"
	"github.com/tailplane/tailplane/proxy/route"
)

// groupService is how this replica serves one Tailscale Service of the
// ingress-group role. It outlives config reloads that keep the service,
// so its listeners stay open while its routes and targets swap.
type groupService struct {
	name      string
	l7        *l7.Handler
	plainHTTP atomic.Bool
	cert      atomic.Pointer[sharedCert]
	// api serves the service in the kube-apiserver role (apiserverrole.go).
	api atomic.Pointer[http.Handler]
	// gateway is the plan of a Gateway service (groupgateway.go), read by
	// its listeners; gatewayHandlers are its HTTP(S) ports' L7 handlers
	// (Run goroutine only), kept across reloads as the listeners are.
	gateway         atomic.Pointer[gatewayPlan]
	gatewayHandlers map[int]*l7.Handler
}

// groupPlan is the part of an ingress-group config prepared before its
// listeners open; commitGroup makes it current.
type groupPlan struct {
	services map[string]*groupService
	routes   map[string]*l7.Routes
	api      map[string]http.Handler
	certs    map[string]*sharedCert
	gateways map[string]*gatewayPlan
	// errs are why a service cannot be served whatever happens next
	// (plugins, certificate source); such a service is not advertised.
	errs map[string]error
}

// groupService returns the runtime of a configured service, reusing the
// current one so that its open listeners keep serving.
func (e *Engine) groupServiceFor(name string) *groupService {
	if gs, ok := e.group[name]; ok {
		return gs
	}
	return &groupService{name: name, l7: l7.NewHandler(e.whois, e.transport, e.metrics, e.log), gatewayHandlers: map[int]*l7.Handler{}}
}

// planGroup prepares routes and certificate sources for every service of
// cfg. Problems of one service do not refuse the config: they keep that
// service from being advertised and are reported under its name.
func (e *Engine) planGroup(ctx context.Context, cfg *config.Config) (*groupPlan, error) {
	p := &groupPlan{services: map[string]*groupService{}, routes: map[string]*l7.Routes{},
		api: map[string]http.Handler{}, certs: map[string]*sharedCert{}, gateways: map[string]*gatewayPlan{}, errs: map[string]error{}}
	// The replica runs one plugin host: it gets the union of the services'
	// plugins, and each service runs its own part of it.
	union, errs := pluginUnion(groupServices(cfg))
	routers, err := e.pluginRouters(ctx, union)
	if err != nil {
		return nil, err
	}
	for _, s := range groupServices(cfg) {
		gs := e.groupServiceFor(s.Name)
		p.services[s.Name] = gs
		if err := errs[s.Name]; err != nil {
			p.errs[s.Name] = err
			continue
		}
		if s.Gateway != nil {
			if err := e.planGroupGatewayInto(p, s, routers, len(union)); err != nil {
				p.errs[s.Name] = err
			}
			continue
		}
		if s.L7 == nil {
			continue
		}
		if cfg.APIServer != nil {
			h, err := e.apiServerHandler(cfg.APIServer.EffectiveMode())
			if err != nil {
				p.errs[s.Name] = err
				continue
			}
			p.api[s.Name] = h
		} else {
			rs, err := servicePlugins(routers, s.Plugins, len(union))
			if err != nil {
				p.errs[s.Name] = err
				continue
			}
			p.routes[s.Name] = e.routesFor(s.L7, rs)
		}
		c, err := e.sharedCertFor(s.L7.TLS.SecretName)
		if err != nil {
			p.errs[s.Name] = fmt.Errorf("l7.tls: %w", err)
			continue
		}
		p.certs[s.Name] = c
	}
	return p, nil
}

// pluginUnion lists every plugin of the services once (by name, in order
// of first use). A service that names a plugin with another spec than an
// earlier service gets an error: one plugin host cannot run both.
func pluginUnion(services []config.Service) ([]config.Plugin, map[string]error) {
	var union []config.Plugin
	first := map[string]int{} // plugin name -> index in union
	owner := map[string]string{}
	errs := map[string]error{}
	for _, s := range services {
		for _, pl := range servicePluginList(s) {
			i, seen := first[pl.Name]
			if !seen {
				first[pl.Name], owner[pl.Name] = len(union), s.Name
				union = append(union, pl)
				continue
			}
			if string(union[i].Spec) != string(pl.Spec) && errs[s.Name] == nil {
				errs[s.Name] = fmt.Errorf("plugins: %q differs from the plugin of that name in %s", pl.Name, owner[pl.Name])
			}
		}
	}
	return union, errs
}

// servicePlugins narrows the routers built for the union of all plugins
// (unionLen of them) to one service's: a router that can run a subset
// (the plugin host's Only) runs the service's; any other router serves
// only a service that uses every plugin.
func servicePlugins(routers []route.Router, plugins []config.Plugin, unionLen int) ([]route.Router, error) {
	if len(plugins) == 0 {
		return nil, nil
	}
	names := make([]string, len(plugins))
	for i, pl := range plugins {
		names[i] = pl.Name
	}
	var out []route.Router
	for _, r := range routers {
		if sub, ok := r.(interface{ Only([]string) route.Router }); ok {
			out = append(out, sub.Only(names))
			continue
		}
		if len(plugins) != unionLen {
			return nil, fmt.Errorf("plugins: the plugin host runs one list for the whole replica, and %v is only part of it", names)
		}
		out = append(out, r)
	}
	return out, nil
}

// commitGroup makes a plan current, after its listeners opened.
func (e *Engine) commitGroup(cfg *config.Config, p *groupPlan, listenErrs map[string]error) {
	for _, s := range groupServices(cfg) {
		if s.L7 != nil {
			p.services[s.Name].plainHTTP.Store(s.L7.PlainHTTP)
		}
	}
	for name, gs := range p.services {
		if r, ok := p.routes[name]; ok {
			gs.l7.SetRoutes(r)
		}
		if h, ok := p.api[name]; ok {
			gs.api.Store(&h)
		}
		if c, ok := p.certs[name]; ok {
			gs.cert.Store(c)
		}
		if plan, ok := p.gateways[name]; ok {
			e.commitGroupGateway(gs, plan)
		}
	}
	e.group = p.services
	e.groupErrs = p.errs
	e.listenErrs = listenErrs
	// Certificate Secrets no service uses any more stop being followed.
	used := map[string]bool{}
	for _, c := range p.certs {
		used[c.secret] = true
	}
	for name, c := range e.sharedCerts {
		if !used[name] {
			c.stop()
			delete(e.sharedCerts, name)
		}
	}
}

// leaveGroup drops the ingress-group state when another role takes over.
func (e *Engine) leaveGroup() {
	for name, c := range e.sharedCerts {
		c.stop()
		delete(e.sharedCerts, name)
	}
	e.group, e.groupErrs, e.listenErrs = nil, nil, nil
}

// groupSpecs lists the listeners of the ingress-group role: per service,
// one connListener per TCP port (fed by netstack's flow hook whatever
// service address the client used) and one packet listener per UDP port
// and service address (the addresses control assigned; none before it
// did, since UDP needs a socket bound to each).
func (e *Engine) groupSpecs(cfg *config.Config, services map[string]*groupService) []listenerSpec {
	var out []listenerSpec
	vips := e.vips.Load()
	for _, s := range groupServices(cfg) {
		gs := services[s.Name]
		if gs == nil {
			continue
		}
		prefix := "group/" + s.Name + "/"
		switch {
		case s.L7 != nil && cfg.Role == config.RoleKubeAPIServer:
			out = append(out, e.apiServerSpec(prefix, gs))
		case s.L7 != nil:
			tlsCfg := e.serviceTLS(gs)
			out = append(out, e.vipSpec(prefix, s.Name, 443, "", func(ln net.Listener) *listenerHandle {
				return e.serveHTTP(tls.NewListener(ln, tlsCfg), gs.l7.Listener(false))
			}))
			if s.L7.HTTPRedirect || s.L7.PlainHTTP {
				redirect, plain := l7.RedirectHandler(), gs.l7.Listener(false)
				h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					if gs.plainHTTP.Load() {
						plain.ServeHTTP(w, r)
					} else {
						redirect.ServeHTTP(w, r)
					}
				})
				out = append(out, e.vipSpec(prefix, s.Name, 80, "", func(ln net.Listener) *listenerHandle {
					return e.serveHTTP(ln, h)
				}))
			}
		case s.Gateway != nil:
			out = append(out, e.groupGatewaySpecs(prefix, s, gs, vips)...)
		case s.L4 != nil:
			idle := idle(s.L4.UDPIdleTimeoutSeconds)
			for _, p := range s.L4.Ports {
				if p.EffectiveProtocol() == config.TCP {
					key := prefix + "tcp/" + strconv.Itoa(p.Port)
					out = append(out, e.vipSpec(prefix, s.Name, p.Port, p.Target, func(ln net.Listener) *listenerHandle {
						return e.serveTCP(e.ingress, ln, key)
					}))
					continue
				}
				var addrs []netip.Addr
				if vips != nil {
					addrs = vips.byService[s.Name]
				}
				for _, a := range addrs {
					ap := netip.AddrPortFrom(a, uint16(p.Port)).String()
					key := prefix + "udp/" + ap
					out = append(out, listenerSpec{key: key, service: s.Name, target: p.Target, open: func() (*listenerHandle, error) {
						pc, err := e.node.ListenPacket("udp", ap)
						if err != nil {
							return nil, fmt.Errorf("UDP port %d on %s: %w", p.Port, a, err)
						}
						return e.serveUDP(e.ingress, pc, key, idle), nil
					}})
				}
			}
		}
	}
	return out
}

// vipSpec is a TCP port of a Tailscale Service: a connListener registered
// with the flow hook, served by serve.
func (e *Engine) vipSpec(prefix, service string, port int, target string, serve func(net.Listener) *listenerHandle) listenerSpec {
	key := prefix + "tcp/" + strconv.Itoa(port)
	return listenerSpec{key: key, service: service, target: target, open: func() (*listenerHandle, error) {
		k := vipPort{service, uint16(port)}
		ln := newConnListener(strings.TrimPrefix(service, "svc:") + ":" + strconv.Itoa(port))
		e.registerVIP(k, ln)
		h := serve(e.filter(ln))
		return &listenerHandle{
			shutdown: func(ctx context.Context) { e.unregisterVIP(k, ln); ln.Close(); h.shutdown(ctx) },
			kill:     h.kill,
		}, nil
	}}
}

// serviceTLS serves the service's shared certificate, as its Secret holds
// it now.
func (e *Engine) serviceTLS(gs *groupService) *tls.Config {
	return &tls.Config{
		NextProtos: []string{"h2", "http/1.1"},
		MinVersion: tls.VersionTLS12,
		GetCertificate: func(hi *tls.ClientHelloInfo) (*tls.Certificate, error) {
			c := gs.cert.Load()
			if c == nil {
				return nil, fmt.Errorf("no certificate configured for %s", gs.name)
			}
			return c.getCertificate(hi)
		},
	}
}

// tcpPorts are the TCP ports a service is served on.
func tcpPorts(s config.Service) []uint16 {
	var ps []uint16
	switch {
	case s.L7 != nil:
		ps = append(ps, 443)
		if s.L7.HTTPRedirect || s.L7.PlainHTTP {
			ps = append(ps, 80)
		}
	case s.L4 != nil:
		for _, p := range s.L4.Ports {
			if p.EffectiveProtocol() == config.TCP {
				ps = append(ps, uint16(p.Port))
			}
		}
	case s.Gateway != nil:
		for _, l := range s.Gateway.Listeners {
			if l.Protocol != config.ListenerUDP {
				ps = append(ps, uint16(l.Port))
			}
		}
	}
	slices.Sort(ps)
	return slices.Compact(ps)
}

// serviceDomain is a Tailscale Service's MagicDNS name, the name of its
// certificate.
func (e *Engine) serviceDomain(name string) string {
	return strings.TrimPrefix(name, "svc:") + "." + e.dnsSuffix
}
