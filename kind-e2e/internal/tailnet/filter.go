package tailnet

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"tailscale.com/tailcfg"
	"tailscale.com/types/ipproto"
)

// aclEntry is one entry of the policy's acls: src may reach dst
// ("target:ports") over proto (TCP, UDP and ICMP when empty).
type aclEntry struct {
	Action string   `json:"action"`
	Src    []string `json:"src"`
	Dst    []string `json:"dst"`
	Proto  string   `json:"proto"`
}

// ipRule is one acls entry or the ip part of one grant, checked: the
// sources and destinations it names and what it lets through to them.
type ipRule struct {
	src, dst []string
	// dstPorts are the ports per destination (acls name them per dst;
	// a grant's ip applies to all of its dst).
	dstPorts [][]tailcfg.PortRange
	protos   []int
}

// checkACLs checks acls and the ip part of grants and compiles both into
// p.ipRules, in policy order, naming the entry that is wrong.
func (p *policy) checkACLs() error {
	for i, a := range p.ACLs {
		where := fmt.Sprintf("policy: acls[%d]", i)
		if a.Action != "accept" {
			return fmt.Errorf("%s: action %q: only \"accept\" is allowed", where, a.Action)
		}
		if len(a.Src) == 0 || len(a.Dst) == 0 {
			return fmt.Errorf("%s: src and dst must not be empty", where)
		}
		for _, id := range a.Src {
			if err := p.checkGrantTarget(id); err != nil {
				return fmt.Errorf("%s.src: %w", where, err)
			}
		}
		r := ipRule{src: a.Src}
		for _, d := range a.Dst {
			i := strings.LastIndex(d, ":")
			if i < 0 {
				return fmt.Errorf("%s.dst: %q is not target:ports (like tag:k8s:443 or *:*)", where, d)
			}
			target, ports := d[:i], d[i+1:]
			if err := p.checkGrantTarget(target); err != nil {
				return fmt.Errorf("%s.dst: %w", where, err)
			}
			pr, err := parsePorts(ports)
			if err != nil {
				return fmt.Errorf("%s.dst: %q: %w", where, d, err)
			}
			r.dst, r.dstPorts = append(r.dst, target), append(r.dstPorts, pr)
		}
		if a.Proto != "" {
			protos, err := parseProto(a.Proto)
			if err != nil {
				return fmt.Errorf("%s.proto: %w", where, err)
			}
			r.protos = protos
		}
		p.ipRules = append(p.ipRules, r)
	}
	for i, g := range p.Grants {
		for _, spec := range g.IP {
			protos, ports, err := parseIPSpec(spec)
			if err != nil {
				return fmt.Errorf("policy: grants[%d].ip: %q: %w", i, spec, err)
			}
			r := ipRule{src: g.Src, dst: g.Dst, protos: protos}
			for range g.Dst {
				r.dstPorts = append(r.dstPorts, ports)
			}
			p.ipRules = append(p.ipRules, r)
		}
	}
	return nil
}

// parseIPSpec reads one entry of a grant's ip: "*", ports ("443",
// "80,443", "8000-8999", "*"), or proto:ports ("tcp:443", "udp:53",
// "icmp:*").
func parseIPSpec(s string) (protos []int, ports []tailcfg.PortRange, err error) {
	if s == "*" {
		return nil, []tailcfg.PortRange{tailcfg.PortRangeAny}, nil
	}
	proto, rest, ok := strings.Cut(s, ":")
	if !ok {
		rest = s
	} else if protos, err = parseProto(proto); err != nil {
		return nil, nil, err
	}
	ports, err = parsePorts(rest)
	return protos, ports, err
}

// parseProto reads a protocol name or number; "icmp" is ICMP over IPv4
// and IPv6.
func parseProto(s string) ([]int, error) {
	var p ipproto.Proto
	if err := p.UnmarshalText([]byte(s)); err != nil {
		return nil, err
	}
	if p == ipproto.ICMPv4 {
		return []int{int(ipproto.ICMPv4), int(ipproto.ICMPv6)}, nil
	}
	return []int{int(p)}, nil
}

// parsePorts reads "*" or a comma-separated list of ports and ranges.
func parsePorts(s string) ([]tailcfg.PortRange, error) {
	if s == "*" {
		return []tailcfg.PortRange{tailcfg.PortRangeAny}, nil
	}
	var out []tailcfg.PortRange
	for _, part := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		first, err := strconv.ParseUint(lo, 10, 16)
		if err != nil {
			return nil, fmt.Errorf("port %q is not a number 0-65535 or *", lo)
		}
		last := first
		if isRange {
			if last, err = strconv.ParseUint(hi, 10, 16); err != nil || last < first {
				return nil, fmt.Errorf("port range %q is not first-last", part)
			}
		}
		out = append(out, tailcfg.PortRange{First: uint16(first), Last: uint16(last)})
	}
	return out, nil
}

// enforcesIP reports whether the policy decides who reaches whom: it has
// an acls section (even an empty one) or a grant with ip. A policy with
// neither lets everyone reach everything (devcluster's leniency, so that
// a policy written only for autoApprovers or app capabilities keeps the
// tailnet open).
func (p *policy) enforcesIP() bool { return p.ACLs != nil || len(p.ipRules) > 0 }

// packetRules are the packet filter rules that let traffic into node
// self: one per acls entry or grant ip entry whose dst names self (its
// addresses, the Tailscale Services it hosts, or a prefix that covers one
// of them or a route it serves), from the sources its src names.
func (p *policy) packetRules(self grantNode, nodes []grantNode) []tailcfg.FilterRule {
	var out []tailcfg.FilterRule
	for _, r := range p.ipRules {
		var dsts []tailcfg.NetPortRange
		for i, id := range r.dst {
			var ips []string
			if id == "*" {
				ips = []string{"*"}
			} else if pfxs, ok := p.names(id, self); ok {
				for _, d := range pfxs {
					ips = append(ips, d.String())
				}
			}
			for _, ip := range ips {
				for _, pr := range r.dstPorts[i] {
					dsts = append(dsts, tailcfg.NetPortRange{IP: ip, Ports: pr})
				}
			}
		}
		if len(dsts) == 0 {
			continue
		}
		srcs := p.sources(r.src, nodes)
		if len(srcs) == 0 {
			continue
		}
		out = append(out, tailcfg.FilterRule{SrcIPs: srcs, DstPorts: dsts, IPProto: slices.Clone(r.protos)})
	}
	return out
}

// packetFilter is the packet filter node self gets, from testcontrol's
// base (allow-all, plus capability grants such as Funnel ingress): when
// the policy enforces ip rules, base's allow-all rules give way to
// packetRules; the grants' app capabilities are added either way.
func (p *policy) packetFilter(base []tailcfg.FilterRule, self grantNode, nodes []grantNode) []tailcfg.FilterRule {
	out := base
	if p.enforcesIP() {
		out = p.packetRules(self, nodes)
		for _, r := range base {
			if len(r.DstPorts) == 0 {
				out = append(out, r)
			}
		}
	}
	return append(out, p.appRules(self, nodes)...)
}

// coversAny reports whether pfx contains one of addrs or overlaps one of
// routes.
func coversAny(pfx netip.Prefix, addrs, routes []netip.Prefix) bool {
	return slices.ContainsFunc(addrs, func(a netip.Prefix) bool { return pfx.Contains(a.Addr()) }) ||
		slices.ContainsFunc(routes, pfx.Overlaps)
}
