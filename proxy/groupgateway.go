package proxy

import (
	"fmt"
	"net/netip"

	"github.com/tailplane/tailplane/proxy/config"
	"github.com/tailplane/tailplane/proxy/l7"
	"github.com/tailplane/tailplane/proxy/route"
)

// A hosted service's Gateway section is served as the gateway role serves
// its own (gateway.go): the same plan (route tables, SNI tables, splits)
// and the same listener serving, read from the service's current plan
// (groupService.gateway) instead of the engine's, on the service's
// addresses instead of the node's, with the service's shared certificate
// on every HTTPS listener.

// planGroupGateway builds the plan of a Gateway service: the gateway
// role's tables, the service's rule plugins narrowed from the replica's
// plugin routers (built for unionLen plugins), and on HTTPS ports the
// service's shared certificate c, chosen by SNI against the listeners'
// hostnames (the service's MagicDNS name for a listener without one).
func (e *Engine) planGroupGateway(s config.Service, c *sharedCert, routers []route.Router, unionLen int) (*gatewayPlan, error) {
	global, err := servicePlugins(routers, s.Plugins, unionLen)
	if err != nil {
		return nil, err
	}
	perEntry, err := entryPluginsWith(s.Gateway, func(ps []config.Plugin) ([]route.Router, error) {
		return servicePlugins(routers, ps, unionLen)
	})
	if err != nil {
		return nil, err
	}
	plan := e.gatewayTables(s.Gateway, global, perEntry)
	plan.certs = map[int]*portCerts{}
	domain := e.serviceDomain(s.Name)
	for _, l := range s.Gateway.Listeners {
		if l.Protocol != config.ListenerHTTPS || c == nil {
			continue
		}
		pc := plan.certs[l.Port]
		if pc == nil {
			pc = &portCerts{first: c.getCertificate}
			plan.certs[l.Port] = pc
		}
		host := l.Hostname
		if host == "" {
			host = domain
		}
		pc.hosts.Add(host, c.getCertificate)
	}
	return plan, nil
}

// planGroupGatewayInto plans a Gateway service into p: its certificate
// follower (when it has HTTPS listeners) and its plan.
func (e *Engine) planGroupGatewayInto(p *groupPlan, s config.Service, routers []route.Router, unionLen int) error {
	var c *sharedCert
	if t, ok := sharedTLS(s); ok {
		if err := gatewaySecret(s.Gateway); err != nil {
			return err
		}
		var err error
		if c, err = e.sharedCertFor(t.SecretName); err != nil {
			return fmt.Errorf("gateway tls: %w", err)
		}
	}
	plan, err := e.planGroupGateway(s, c, routers, unionLen)
	if err != nil {
		return err
	}
	if c != nil {
		p.certs[s.Name] = c
	}
	p.gateways[s.Name] = plan
	return nil
}

// sharedTLS is the shared certificate section of a service, if it serves
// one: its L7 section's, or its Gateway's first HTTPS listener's (all of
// them serve the same Secret, which gatewaySecret checks).
func sharedTLS(s config.Service) (config.TLS, bool) {
	switch {
	case s.L7 != nil:
		return s.L7.TLS, true
	case s.Gateway != nil:
		for _, l := range s.Gateway.Listeners {
			if l.Protocol == config.ListenerHTTPS && l.TLS != nil {
				return *l.TLS, true
			}
		}
	}
	return config.TLS{}, false
}

// gatewaySecret checks that the HTTPS listeners of a Gateway service all
// serve one certificate Secret, the service's: a replica follows one
// certificate per service.
func gatewaySecret(g *config.Gateway) error {
	secret := ""
	for i, l := range g.Listeners {
		if l.Protocol != config.ListenerHTTPS || l.TLS == nil {
			continue
		}
		if secret == "" {
			secret = l.TLS.SecretName
		} else if l.TLS.SecretName != secret {
			return fmt.Errorf("gateway.listeners[%d].tls.secretName: %q, but the service's certificate is %q (one per Tailscale Service)", i, l.TLS.SecretName, secret)
		}
	}
	return nil
}

// servicePluginList is every plugin a service runs: its own, then those
// of its Gateway's rules, in order.
func servicePluginList(s config.Service) []config.Plugin {
	out := s.Plugins
	if s.Gateway == nil {
		return out
	}
	for _, l := range s.Gateway.Listeners {
		for _, r := range l.HTTPRoutes {
			out = append(out[:len(out):len(out)], r.Plugins...)
		}
	}
	return out
}

// groupGatewaySpecs lists the listeners of a Gateway service: a flow-hook
// listener per TCP port (HTTP, HTTPS, TLS, TCP), keyed by protocol and
// port so that a reload keeps it open, and a UDP socket per UDP port and
// service address that vips assigned.
func (e *Engine) groupGatewaySpecs(prefix string, s config.Service, gs *groupService, vips *vipMap) []listenerSpec {
	var out []listenerSpec
	order, _ := gatewayGroups(s.Gateway)
	for _, k := range order {
		if k.protocol == config.ListenerUDP {
			var addrs []netip.Addr
			if vips != nil {
				addrs = vips.byService[s.Name]
			}
			for _, a := range addrs {
				ap := netip.AddrPortFrom(a, uint16(k.port)).String()
				spec := e.gatewayUDPSpec(prefix+"udp/"+ap, ap, func() string { return planTarget(gs.gateway.Load(), k) })
				spec.service = s.Name
				out = append(out, spec)
			}
			continue
		}
		var h *l7.Handler
		if k.protocol == config.ListenerHTTP || k.protocol == config.ListenerHTTPS {
			h = e.portHandler(gs.gatewayHandlers, k.port, e.log.With("service", s.Name))
		}
		out = append(out, e.vipSpec(prefix+string(k.protocol)+"/", s.Name, k.port, "", e.gatewayServe(k, h, gs.gateway.Load)))
	}
	return out
}

// commitGroupGateway makes plan the Gateway service's current one: its
// HTTP(S) handlers take its routes, its other listeners read it on their
// next connection.
func (e *Engine) commitGroupGateway(gs *groupService, plan *gatewayPlan) {
	gs.gateway.Store(plan)
	for port, r := range plan.routes {
		e.portHandler(gs.gatewayHandlers, port, e.log.With("service", gs.name)).SetRoutes(r)
	}
}
