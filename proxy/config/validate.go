package config

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"regexp"
	"strconv"
	"strings"
)

var (
	dnsLabel = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)
	tagName  = regexp.MustCompile(`^tag:[A-Za-z0-9][A-Za-z0-9-]*$`)
)

// Validate checks the whole config and returns every problem found, each
// prefixed by the field's path (e.g. "l7.rules[0].paths[1].pathType: ...").
func (c *Config) Validate() error {
	var errs []error
	add := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", field, fmt.Sprintf(format, args...)))
	}
	if c.Version != Version {
		add("version", "unknown config version %q (this proxy reads %q)", c.Version, Version)
	}
	if !dnsLabel.MatchString(c.Hostname) {
		add("hostname", "%q is not a DNS label (lower-case letters, digits and '-', at most 63 characters)", c.Hostname)
	}
	for i, t := range c.Tags {
		if !tagName.MatchString(t) {
			add(fmt.Sprintf("tags[%d]", i), "%q is not a tag (want \"tag:<name>\")", t)
		}
	}
	if c.LoginServer != "" {
		u, err := url.Parse(c.LoginServer)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			add("loginServer", "%q is not an http(s) URL", c.LoginServer)
		}
	}
	if c.ListenPort < 0 || c.ListenPort > 65535 {
		add("listenPort", "%d is not a UDP port", c.ListenPort)
	}
	for i, ep := range c.StaticEndpoints {
		if ap, err := netip.ParseAddrPort(ep); err != nil || ap.Port() == 0 {
			add(fmt.Sprintf("staticEndpoints[%d]", i), "%q is not an ip:port address", ep)
		}
	}
	for i, r := range c.AllowedSourceRanges {
		if _, err := netip.ParsePrefix(r); err != nil {
			add(fmt.Sprintf("allowedSourceRanges[%d]", i), "bad CIDR %q: %v", r, err)
		}
	}
	for i, p := range c.Plugins {
		if p.Name == "" {
			add(fmt.Sprintf("plugins[%d].name", i), "must not be empty")
		}
	}
	sections := map[Role]bool{RoleIngressL7: c.L7 != nil, RoleIngressL4: c.L4 != nil, RoleEgress: c.Egress != nil,
		RoleConnector: c.Connector != nil, RoleIngressGroup: c.Group != nil, RoleKubeAPIServer: c.APIServer != nil,
		RoleGateway: c.Gateway != nil}
	switch c.Role {
	case RoleIngressL7, RoleIngressL4, RoleEgress, RoleConnector, RoleIngressGroup, RoleKubeAPIServer, RoleGateway:
		for role, present := range sections {
			if role != c.Role && present {
				add(sectionName(role), "must be empty for role %q", c.Role)
			}
		}
		if !sections[c.Role] {
			add(sectionName(c.Role), "is required for role %q", c.Role)
		}
	default:
		add("role", "unknown role %q (want ingress-l7, ingress-l4, egress, connector, ingress-group, kube-apiserver or gateway)", c.Role)
	}
	if c.L7 != nil {
		c.L7.validate(add)
	}
	if c.L4 != nil {
		if len(c.L4.Ports) == 0 {
			add("l4.ports", "at least one port is required")
		}
		validatePorts("l4.ports", c.L4.Ports, true, add)
		if c.L4.UDPIdleTimeoutSeconds < 0 {
			add("l4.udpIdleTimeoutSeconds", "must not be negative")
		}
	}
	if c.Egress != nil {
		c.Egress.validate(add)
	}
	if c.Connector != nil {
		c.Connector.validate(add)
	}
	if c.Group != nil {
		c.Group.validate(add)
	}
	if c.APIServer != nil {
		c.APIServer.validate(add)
	}
	if c.Gateway != nil {
		c.Gateway.validate(add)
		for i, l := range c.Gateway.Listeners {
			if l.TLS != nil && l.TLS.EffectiveMode() == TLSShared {
				add(fmt.Sprintf("gateway.listeners[%d].tls.mode", i), "mode %q is for Tailscale Services (group.services[].gateway)", TLSShared)
			}
		}
	}
	return errors.Join(errs...)
}

func sectionName(r Role) string {
	switch r {
	case RoleIngressL7:
		return "l7"
	case RoleIngressL4:
		return "l4"
	case RoleConnector:
		return "connector"
	case RoleIngressGroup:
		return "group"
	case RoleKubeAPIServer:
		return "apiServer"
	case RoleGateway:
		return "gateway"
	default:
		return "egress"
	}
}

type addFunc func(field, format string, args ...any)

func (l *L7) validate(add addFunc) {
	switch l.TLS.EffectiveMode() {
	case TLSTailscaleCert:
	case TLSSecret, TLSShared:
		if l.TLS.SecretName == "" {
			add("l7.tls.secretName", "is required for mode %q", l.TLS.EffectiveMode())
		}
	case TLSFiles:
		if l.TLS.CertFile == "" || l.TLS.KeyFile == "" {
			add("l7.tls", "certFile and keyFile are required for mode %q", TLSFiles)
		}
	case TLSNone:
		if !l.PlainHTTP {
			add("l7.tls.mode", "%q serves nothing without plainHTTP", TLSNone)
		}
		if l.Funnel {
			add("l7.funnel", "Funnel serves HTTPS and needs a certificate; it cannot go with TLS mode %q", TLSNone)
		}
	default:
		add("l7.tls.mode", "unknown TLS mode %q (want tailscale-cert, secret, files, shared or none)", l.TLS.Mode)
	}
	if l.HTTPRedirect && l.PlainHTTP {
		add("l7", "httpRedirect and plainHTTP both claim port 80; set one")
	}
	if len(l.Rules) == 0 && l.DefaultBackend == nil {
		add("l7", "needs at least one rule or a defaultBackend")
	}
	if l.DefaultBackend != nil {
		l.DefaultBackend.validate("l7.defaultBackend", add)
	}
	extra := map[string]bool{}
	for i, b := range l.ExtraBackends {
		field := fmt.Sprintf("l7.extraBackends[%d]", i)
		b.validate(field, add)
		if extra[b.Service] {
			add(field+".service", "%q is listed twice", b.Service)
		}
		extra[b.Service] = true
	}
	seen := map[string]string{}
	for i, r := range l.Rules {
		field := fmt.Sprintf("l7.rules[%d]", i)
		if r.Host != "" && !validHost(r.Host) {
			add(field+".host", "%q is not a host name or a wildcard like \"*.example.com\"", r.Host)
		}
		if len(r.Paths) == 0 {
			add(field+".paths", "at least one path is required")
		}
		for j, p := range r.Paths {
			pf := fmt.Sprintf("%s.paths[%d]", field, j)
			if !strings.HasPrefix(p.Path, "/") {
				add(pf+".path", "%q must start with \"/\"", p.Path)
			}
			switch p.PathType {
			case "", PathExact, PathPrefix, PathImplementationSpecific:
			default:
				add(pf+".pathType", "unknown path type %q (want Exact, Prefix or ImplementationSpecific)", p.PathType)
			}
			key := strings.ToLower(r.Host) + " " + string(effectivePathType(p.PathType)) + " " + p.Path
			if prev, dup := seen[key]; dup {
				add(pf, "duplicates %s (same host, path and type)", prev)
			}
			seen[key] = pf
			p.Backend.validate(pf+".backend", add)
		}
	}
}

// effectivePathType maps the Ingress path types onto the two behaviours.
func effectivePathType(t PathType) PathType {
	if t == PathExact {
		return PathExact
	}
	return PathPrefix
}

func validHost(h string) bool {
	h = strings.TrimPrefix(h, "*.")
	labels := strings.Split(h, ".")
	for _, l := range labels {
		if !dnsLabel.MatchString(strings.ToLower(l)) {
			return false
		}
	}
	return true
}

func (b Backend) validate(field string, add addFunc) {
	if b.Service == "" {
		add(field+".service", "must not be empty")
	}
	if err := checkHostPort(b.Address); err != nil {
		add(field+".address", "%v", err)
	}
}

// checkHostPort accepts "host:port" where host is a literal IP (a
// ClusterIP) or a DNS name (an ExternalName Service's target or a headless
// Service's name, resolved on every new connection).
func checkHostPort(s string) error {
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return fmt.Errorf("%q is not <host>:<port>: %v", s, err)
	}
	if _, err := netip.ParseAddr(host); err != nil && !validHost(strings.TrimSuffix(host, ".")) || strings.HasPrefix(host, "*.") {
		return fmt.Errorf("%q: host %q is neither an IP address nor a DNS name", s, host)
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < 1 || n > 65535 {
		return fmt.Errorf("%q: bad port %q (want 1-65535)", s, port)
	}
	return nil
}

func validPort(n int) bool { return n >= 1 && n <= 65535 }

// validatePorts checks port numbers, protocols and duplicates; ingress ports
// need a ClusterIP:port target, egress ports an optional target port.
func validatePorts(field string, ports []PortMap, ingress bool, add addFunc) {
	seen := map[string]int{}
	for i, p := range ports {
		pf := fmt.Sprintf("%s[%d]", field, i)
		proto := p.EffectiveProtocol()
		if proto != TCP && proto != UDP {
			add(pf+".protocol", "unknown protocol %q (want TCP or UDP)", p.Protocol)
		}
		if !validPort(p.Port) {
			add(pf+".port", "bad port %d (want 1-65535)", p.Port)
		}
		key := fmt.Sprintf("%s/%d", proto, p.Port)
		if prev, dup := seen[key]; dup {
			add(pf+".port", "duplicate port %s (also %s[%d])", key, field, prev)
		} else {
			seen[key] = i
		}
		if ingress {
			if err := checkHostPort(p.Target); err != nil {
				add(pf+".target", "%v", err)
			}
			if p.TargetPort != 0 {
				add(pf+".targetPort", "not used for ingress; put the port in target")
			}
		} else {
			if p.Target != "" {
				add(pf+".target", "not used for egress; the target is the egress target")
			}
			if p.TargetPort != 0 && !validPort(p.TargetPort) {
				add(pf+".targetPort", "bad port %d (want 1-65535)", p.TargetPort)
			}
		}
	}
}

func (e *Egress) validate(add addFunc) {
	// No target is valid: an egress ProxyGroup's replicas join the tailnet
	// before any Service uses the group.
	if e.UDPIdleTimeoutSeconds < 0 {
		add("egress.udpIdleTimeoutSeconds", "must not be negative")
	}
	// Listen ports are shared by all targets on the pod IP.
	owner := map[string]int{}
	for i, t := range e.Targets {
		field := fmt.Sprintf("egress.targets[%d]", i)
		switch {
		case (t.FQDN == "") == (t.IP == ""):
			add(field, "set exactly one of fqdn and ip")
		case t.IP != "":
			if _, err := netip.ParseAddr(t.IP); err != nil {
				add(field+".ip", "%q is not an IP address", t.IP)
			}
		default:
			if !validHost(trimDot(t.FQDN)) || strings.HasPrefix(t.FQDN, "*") {
				add(field+".fqdn", "%q is not a DNS name", t.FQDN)
			}
		}
		if len(t.Ports) == 0 {
			add(field+".ports", "at least one port is required")
		}
		validatePorts(field+".ports", t.Ports, false, add)
		for _, p := range t.Ports {
			key := fmt.Sprintf("%s/%d", p.EffectiveProtocol(), p.Port)
			if prev, ok := owner[key]; ok && prev != i {
				add(field+".ports", "duplicate listen port %s (also egress.targets[%d])", key, prev)
			} else {
				owner[key] = i
			}
		}
	}
}
