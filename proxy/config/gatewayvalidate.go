package config

import (
	"fmt"
	"regexp"
	"strings"
)

// redirectCodes are the status codes the Gateway API allows a redirect.
var redirectCodes = map[int]bool{301: true, 302: true, 303: true, 307: true, 308: true}

// httpMethods are the methods an HTTPRoute match may name.
var httpMethods = map[string]bool{"GET": true, "HEAD": true, "POST": true, "PUT": true, "DELETE": true,
	"CONNECT": true, "OPTIONS": true, "TRACE": true, "PATCH": true}

// funnelPorts are the ports Tailscale Funnel serves.
var funnelPorts = map[int]bool{443: true, 8443: true, 10000: true}

// udpTransport reports whether p is served over UDP; the others share
// TCP ports.
func (p ListenerProtocol) udpTransport() bool { return p == ListenerUDP }

// validatePorts checks that listeners sharing a port can be told apart:
// same protocol (TCP and UDP listeners may share a number), and distinct
// hostnames for the protocols that choose by Host or SNI.
func (g *Gateway) validatePorts(add addFunc) {
	type portKey struct {
		port int
		udp  bool
	}
	first := map[portKey]int{}
	hosts := map[portKey]map[string]int{}
	for i, l := range g.Listeners {
		k := portKey{l.Port, l.Protocol.udpTransport()}
		field := fmt.Sprintf("gateway.listeners[%d]", i)
		j, seen := first[k]
		if !seen {
			first[k], hosts[k] = i, map[string]int{strings.ToLower(l.Hostname): i}
			continue
		}
		other := g.Listeners[j]
		switch {
		case other.Protocol != l.Protocol:
			add(field+".protocol", "%s on port %d, where gateway.listeners[%d] is %s: listeners sharing a port must share the protocol",
				l.Protocol, l.Port, j, other.Protocol)
		case l.Protocol == ListenerTCP || l.Protocol == ListenerUDP:
			add(field+".port", "%s port %d is also gateway.listeners[%d]'s: nothing tells their connections apart", l.Protocol, l.Port, j)
		default:
			h := strings.ToLower(l.Hostname)
			if prev, dup := hosts[k][h]; dup {
				add(field+".hostname", "%q on port %d is also gateway.listeners[%d]'s: listeners sharing a port need distinct hostnames", l.Hostname, l.Port, prev)
			} else {
				hosts[k][h] = i
			}
		}
	}
}

// validate checks one listener and its routes.
func (l *Listener) validate(field string, add addFunc) {
	if !validPort(l.Port) {
		add(field+".port", "bad port %d (want 1-65535)", l.Port)
	}
	byHost := l.Protocol == ListenerHTTP || l.Protocol == ListenerHTTPS || l.Protocol == ListenerTLS
	switch l.Protocol {
	case ListenerHTTP, ListenerHTTPS, ListenerTLS, ListenerTCP, ListenerUDP:
	default:
		add(field+".protocol", "unknown protocol %q (want HTTP, HTTPS, TLS, TCP or UDP)", l.Protocol)
	}
	if l.Hostname != "" && !byHost {
		add(field+".hostname", "%s listeners have no hostname", l.Protocol)
	} else if l.Hostname != "" && !validHost(l.Hostname) {
		add(field+".hostname", "%q is not a host name or a wildcard like \"*.example.com\"", l.Hostname)
	}
	if l.Protocol == ListenerHTTPS {
		switch {
		case l.TLS == nil:
			add(field+".tls", "is required for HTTPS")
		case l.TLS.EffectiveMode() == TLSTailscaleCert:
		case l.TLS.EffectiveMode() == TLSSecret, l.TLS.EffectiveMode() == TLSShared:
			// Shared is a Tailscale Service's certificate: the group
			// section requires it there, and the gateway role refuses it
			// (Config.validate).
			if l.TLS.SecretName == "" {
				add(field+".tls.secretName", "is required for mode %q", l.TLS.EffectiveMode())
			}
		default:
			add(field+".tls.mode", "unknown gateway TLS mode %q (want tailscale-cert, secret, or shared on a Tailscale Service)", l.TLS.Mode)
		}
	}
	if l.Funnel && l.Protocol != ListenerHTTPS {
		add(field+".funnel", "only HTTPS listeners can be exposed through Funnel")
	} else if l.Funnel && !funnelPorts[l.Port] {
		add(field+".funnel", "Funnel offers ports 443, 8443 and 10000, not %d", l.Port)
	}
	servesHTTP := l.Protocol == ListenerHTTP || l.Protocol == ListenerHTTPS
	if len(l.HTTPRoutes) > 0 && !servesHTTP {
		add(field+".httpRoutes", "%s listeners serve no HTTP routes", l.Protocol)
	}
	if len(l.TLSRoutes) > 0 && l.Protocol != ListenerTLS {
		add(field+".tlsRoutes", "%s listeners serve no TLS routes", l.Protocol)
	}
	if len(l.Backends) > 0 && l.Protocol != ListenerTCP && l.Protocol != ListenerUDP {
		add(field+".backends", "%s listeners route by their routes; backends are for TCP and UDP listeners", l.Protocol)
	}
	for i := range l.HTTPRoutes {
		l.HTTPRoutes[i].validate(fmt.Sprintf("%s.httpRoutes[%d]", field, i), add)
	}
	for i, r := range l.TLSRoutes {
		rf := fmt.Sprintf("%s.tlsRoutes[%d]", field, i)
		if r.Name == "" {
			add(rf+".name", "must not be empty")
		}
		validateHostnames(rf+".hostnames", r.Hostnames, add)
		validateWeighted(rf+".backends", r.Backends, add)
	}
	validateWeighted(field+".backends", l.Backends, add)
}

func validateHostnames(field string, hosts []string, add addFunc) {
	for i, h := range hosts {
		if !validHost(h) {
			add(fmt.Sprintf("%s[%d]", field, i), "%q is not a host name or a wildcard like \"*.example.com\"", h)
		}
	}
}

func validateWeighted(field string, bs []WeightedBackend, add addFunc) {
	for i, b := range bs {
		bf := fmt.Sprintf("%s[%d]", field, i)
		if b.Weight < 0 {
			add(bf+".weight", "must not be negative")
		}
		if b.Invalid {
			continue
		}
		b.Backend.validate(bf, add)
		if b.HTTPS && b.H2C {
			add(bf, "https and h2c exclude each other")
		}
	}
}

func (r *HTTPRoute) validate(field string, add addFunc) {
	if r.Name == "" {
		add(field+".name", "must not be empty")
	}
	validateHostnames(field+".hostnames", r.Hostnames, add)
	r.Match.validate(field+".match", add)
	prefix := r.Match.PathType == "" || r.Match.PathType == MatchPathPrefix
	r.Filters.validate(field+".filters", prefix, add)
	validateWeighted(field+".backends", r.Backends, add)
	for i, p := range r.Plugins {
		if p.Name == "" {
			add(fmt.Sprintf("%s.plugins[%d].name", field, i), "must not be empty")
		}
	}
	if r.RequestTimeoutMillis < 0 {
		add(field+".requestTimeoutMillis", "must not be negative")
	}
	if r.BackendTimeoutMillis < 0 {
		add(field+".backendTimeoutMillis", "must not be negative")
	}
}

func (m *HTTPMatch) validate(field string, add addFunc) {
	switch m.PathType {
	case "", MatchExact, MatchPathPrefix:
		if m.Path != "" && !strings.HasPrefix(m.Path, "/") {
			add(field+".path", "%q must start with \"/\"", m.Path)
		}
		if m.PathType != "" && m.Path == "" {
			add(field+".path", "is required with pathType %s", m.PathType)
		}
	case MatchRegularExpression:
		if _, err := regexp.Compile(m.Path); err != nil {
			add(field+".path", "not an RE2 expression: %v", err)
		}
	default:
		add(field+".pathType", "unknown path match type %q (want Exact, PathPrefix or RegularExpression)", m.PathType)
	}
	validateValues(field+".headers", m.Headers, add)
	validateValues(field+".queryParams", m.QueryParams, add)
	if m.Method != "" && !httpMethods[m.Method] {
		add(field+".method", "unknown method %q", m.Method)
	}
}

func validateValues(field string, vs []ValueMatch, add addFunc) {
	for i, v := range vs {
		vf := fmt.Sprintf("%s[%d]", field, i)
		if v.Name == "" {
			add(vf+".name", "must not be empty")
		}
		if v.Regex {
			if _, err := regexp.Compile(v.Value); err != nil {
				add(vf+".value", "not an RE2 expression: %v", err)
			}
		}
	}
}

// validate checks the filters; prefix says whether the entry's match is a
// path prefix, which ReplacePrefixMatch needs.
func (f *HTTPFilters) validate(field string, prefix bool, add addFunc) {
	f.RequestHeaders.validate(field+".requestHeaders", add)
	f.ResponseHeaders.validate(field+".responseHeaders", add)
	if r := f.Redirect; r != nil {
		rf := field + ".redirect"
		if r.StatusCode != 0 && !redirectCodes[r.StatusCode] {
			add(rf+".statusCode", "%d is not a redirect code (want 301, 302, 303, 307 or 308)", r.StatusCode)
		}
		if r.Scheme != "" && r.Scheme != "http" && r.Scheme != "https" {
			add(rf+".scheme", "unknown scheme %q (want http or https)", r.Scheme)
		}
		if r.Port != 0 && !validPort(r.Port) {
			add(rf+".port", "bad port %d (want 1-65535)", r.Port)
		}
		validateTarget(rf, r.Hostname, r.Path, prefix, add)
		if f.Rewrite != nil {
			add(field, "redirect and rewrite exclude each other")
		}
	}
	if r := f.Rewrite; r != nil {
		validateTarget(field+".rewrite", r.Hostname, r.Path, prefix, add)
	}
	for i, m := range f.Mirrors {
		mf := fmt.Sprintf("%s.mirrors[%d]", field, i)
		m.Backend.validate(mf+".backend", add)
		if m.Percent < 0 || m.Percent > 100 {
			add(mf+".percent", "%d is not a percentage (want 0-100)", m.Percent)
		}
	}
}

// validateTarget checks a redirect's or rewrite's hostname and path.
func validateTarget(field, host string, p *PathModifier, prefix bool, add addFunc) {
	if host != "" && (!validHost(host) || strings.HasPrefix(host, "*.")) {
		add(field+".hostname", "%q is not a host name", host)
	}
	if p == nil {
		return
	}
	switch p.Type {
	case ReplaceFullPath:
	case ReplacePrefixMatch:
		if !prefix {
			add(field+".path.type", "ReplacePrefixMatch needs a PathPrefix match")
		}
	default:
		add(field+".path.type", "unknown path modifier %q (want ReplaceFullPath or ReplacePrefixMatch)", p.Type)
	}
	if !strings.HasPrefix(p.Value, "/") {
		add(field+".path.value", "%q must start with \"/\"", p.Value)
	}
}

func (h *HeaderModifier) validate(field string, add addFunc) {
	if h == nil {
		return
	}
	for i, s := range h.Set {
		if s.Name == "" {
			add(fmt.Sprintf("%s.set[%d].name", field, i), "must not be empty")
		}
	}
	for i, s := range h.Add {
		if s.Name == "" {
			add(fmt.Sprintf("%s.add[%d].name", field, i), "must not be empty")
		}
	}
	for i, s := range h.Remove {
		if s == "" {
			add(fmt.Sprintf("%s.remove[%d]", field, i), "must not be empty")
		}
	}
}
