package config

import (
	"fmt"
	"regexp"
	"slices"
)

// serviceName is a Tailscale Service name: "svc:" and one DNS label.
var serviceName = regexp.MustCompile(`^svc:[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

// Group is the ingress-group section: the Tailscale Services one replica of
// an ingress ProxyGroup hosts. Every replica of the group gets the same
// services (only TLS.Issue differs), advertises each one it can serve, and
// serves it on the service's own tailnet addresses, so that control can
// send a client to any healthy replica under the service's one MagicDNS
// name.
type Group struct {
	// Services are the hosted Tailscale Services; names are unique.
	Services []Service `json:"services,omitempty"`
}

// Service is one Tailscale Service hosted by a group replica: exactly one
// of L7, L4 or Gateway.
type Service struct {
	// Name is the Tailscale Service, "svc:<dns label>"; its MagicDNS name
	// is <label>.<tailnet domain>.
	Name string `json:"name"`
	// L7 serves HTTPS (and optionally HTTP) routes on the service's
	// addresses, as an ingress-l7 proxy does on its own. TLS mode must be
	// shared; Funnel is not offered on Tailscale Services.
	L7 *L7 `json:"l7,omitempty"`
	// L4 forwards TCP and UDP ports of the service's addresses.
	L4 *L4 `json:"l4,omitempty"`
	// Gateway serves a Gateway API Gateway's listeners on the service's
	// addresses, as a gateway proxy does on its own; HTTPS listeners use
	// the shared certificate (TLS mode shared), and Funnel is not offered.
	Gateway *Gateway `json:"gateway,omitempty"`
	// Plugins are the routing plugins of this service's L7 routes, run
	// in order after its routing table.
	Plugins []Plugin `json:"plugins,omitempty"`
}

// validate checks the group section; fields are reported under "group.".
func (g *Group) validate(add addFunc) {
	seen := map[string]int{}
	for i, s := range g.Services {
		field := fmt.Sprintf("group.services[%d]", i)
		sub := func(f, format string, args ...any) {
			if f != "" {
				f = "." + f
			}
			add(field+f, format, args...)
		}
		if !serviceName.MatchString(s.Name) {
			sub("name", "%q is not a Tailscale Service name (want \"svc:<dns label>\")", s.Name)
		}
		if j, dup := seen[s.Name]; dup {
			sub("name", "%q is also group.services[%d]", s.Name, j)
		}
		seen[s.Name] = i
		sections := 0
		for _, present := range []bool{s.L7 != nil, s.L4 != nil, s.Gateway != nil} {
			if present {
				sections++
			}
		}
		switch {
		case sections != 1:
			sub("", "exactly one of l7, l4 or gateway is required")
		case s.Gateway != nil:
			s.Gateway.validate(sub)
			for j, l := range s.Gateway.Listeners {
				if l.Protocol == ListenerHTTPS && (l.TLS == nil || l.TLS.EffectiveMode() != TLSShared) {
					sub(fmt.Sprintf("gateway.listeners[%d].tls.mode", j), "must be %q for a Tailscale Service", TLSShared)
				}
				if l.Funnel {
					sub(fmt.Sprintf("gateway.listeners[%d].funnel", j), "Funnel is not offered on Tailscale Services")
				}
			}
		case s.L7 != nil:
			s.L7.validate(sub)
			if s.L7.TLS.EffectiveMode() != TLSShared {
				sub("l7.tls.mode", "must be %q for a Tailscale Service", TLSShared)
			}
			if s.L7.Funnel {
				sub("l7.funnel", "Funnel is not offered on Tailscale Services")
			}
		case s.L4 != nil:
			if len(s.L4.Ports) == 0 {
				sub("l4.ports", "at least one port is required")
			}
			validatePorts("l4.ports", s.L4.Ports, true, sub)
		}
		for j, p := range s.Plugins {
			if p.Name == "" {
				sub(fmt.Sprintf("plugins[%d].name", j), "must not be empty")
			}
		}
	}
}

// Issuing returns s with Issue set to issue on every shared certificate it
// serves: the group's replica 0 issues them, the others read them.
func (s Service) Issuing(issue bool) Service {
	if s.L7 != nil {
		l7 := *s.L7
		l7.TLS.Issue = issue
		s.L7 = &l7
	}
	if s.Gateway != nil {
		gw := *s.Gateway
		gw.Listeners = append([]Listener(nil), gw.Listeners...)
		for i, l := range gw.Listeners {
			if l.TLS != nil && l.TLS.EffectiveMode() == TLSShared {
				t := *l.TLS
				t.Issue = issue
				gw.Listeners[i].TLS = &t
			}
		}
		s.Gateway = &gw
	}
	return s
}

// SharedCertificates are the Secrets of the shared certificates s serves,
// each once.
func (s Service) SharedCertificates() []string {
	var out []string
	add := func(t TLS) {
		if t.EffectiveMode() == TLSShared && t.SecretName != "" && !slices.Contains(out, t.SecretName) {
			out = append(out, t.SecretName)
		}
	}
	if s.L7 != nil {
		add(s.L7.TLS)
	}
	if s.Gateway != nil {
		for _, l := range s.Gateway.Listeners {
			if l.TLS != nil {
				add(*l.TLS)
			}
		}
	}
	return out
}
