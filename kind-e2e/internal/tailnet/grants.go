package tailnet

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"strings"

	"tailscale.com/net/tsaddr"
	"tailscale.com/tailcfg"
	"tailscale.com/types/key"
)

// grant is one entry of the policy's grants. Its app capabilities reach
// the destination nodes as Tailscale's control plane sends them: CapGrant
// rules in each destination's packet filter, which the node reads back as
// the WhoIs CapMap of a connection from a source. Its ip part is accepted
// and not enforced (every node reaches every other).
type grant struct {
	Src []string `json:"src"`
	Dst []string `json:"dst"`
	IP  []string `json:"ip"`
	// App maps a capability name to its values, kept raw until checked
	// (each must be a JSON array of objects).
	App map[string]json.RawMessage `json:"app"`

	app tailcfg.PeerCapMap // App, checked
}

// checkGrants checks the policy's grants, naming the entry that is wrong,
// and fills in each grant's parsed app capabilities.
func (p *policy) checkGrants() error {
	for i := range p.Grants {
		g := &p.Grants[i]
		where := fmt.Sprintf("policy: grants[%d]", i)
		if len(g.Src) == 0 {
			return fmt.Errorf("%s: src is empty", where)
		}
		if len(g.Dst) == 0 {
			return fmt.Errorf("%s: dst is empty", where)
		}
		if len(g.IP) == 0 && len(g.App) == 0 {
			return fmt.Errorf("%s: neither ip nor app is set", where)
		}
		for _, id := range g.Src {
			if err := p.checkGrantTarget(id); err != nil {
				return fmt.Errorf("%s.src: %w", where, err)
			}
		}
		for _, id := range g.Dst {
			if err := p.checkGrantTarget(id); err != nil {
				return fmt.Errorf("%s.dst: %w", where, err)
			}
		}
		for name, raw := range g.App {
			vals, err := checkAppValues(name, raw)
			if err != nil {
				return fmt.Errorf("%s.app: %w", where, err)
			}
			if g.app == nil {
				g.app = tailcfg.PeerCapMap{}
			}
			g.app[tailcfg.PeerCapability(name)] = vals
		}
	}
	for name, v := range p.Hosts {
		if _, err := parseHost(v); err != nil {
			return fmt.Errorf("policy: hosts[%s]: %q is not an IP address or CIDR prefix", name, v)
		}
	}
	return nil
}

// checkAppValues checks one app capability as Tailscale does: a name of
// the form domain/path and a JSON array of objects as its values.
func checkAppValues(name string, raw json.RawMessage) ([]tailcfg.RawMessage, error) {
	domain, path, ok := strings.Cut(name, "/")
	if !ok || domain == "" || path == "" || !strings.Contains(domain, ".") || strings.ContainsAny(name, " \t\n") {
		return nil, fmt.Errorf("capability name %q is not of the form domain/path (like tailscale.com/cap/kubernetes)", name)
	}
	var vals []json.RawMessage
	if err := json.Unmarshal(raw, &vals); err != nil {
		return nil, fmt.Errorf("%s: the values must be a JSON array of objects, got %s", name, compact(raw))
	}
	out := make([]tailcfg.RawMessage, 0, len(vals))
	for j, v := range vals {
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(v, &obj); err != nil || obj == nil {
			return nil, fmt.Errorf("%s[%d]: the values must be JSON objects, got %s", name, j, compact(v))
		}
		out = append(out, tailcfg.RawMessage(compact(v)))
	}
	return out, nil
}

func compact(raw []byte) string {
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return string(raw)
	}
	return b.String()
}

// checkGrantTarget accepts what a grant's src or dst may name in
// devcluster: "*", an identity (checkIdentity; a tag must be in tagOwners
// when the policy has tagOwners), a host of hosts, an IP address or a
// CIDR prefix.
func (p *policy) checkGrantTarget(id string) error {
	switch {
	case id == "*":
		return nil
	case strings.HasPrefix(id, "tag:"):
		if err := tailcfg.CheckTag(id); err != nil {
			return fmt.Errorf("%q: %w", id, err)
		}
		if len(p.TagOwners) > 0 {
			if _, ok := p.TagOwners[id]; !ok {
				return fmt.Errorf("tag %q is not defined in tagOwners", id)
			}
		}
		return nil
	case strings.HasPrefix(id, "autogroup:") && id != "autogroup:member" && id != "autogroup:tagged":
		return fmt.Errorf("%q is not supported by devcluster (autogroup:member and autogroup:tagged are)", id)
	case strings.HasPrefix(id, "group:"):
		return p.checkIdentity(id)
	case strings.HasPrefix(id, "svc:"):
		return fmt.Errorf("%q: Tailscale Services in grants are not supported by devcluster", id)
	}
	if _, ok := p.Hosts[id]; ok {
		return nil
	}
	if _, err := parseHost(id); err == nil {
		return nil
	}
	if err := p.checkIdentity(id); err != nil {
		return fmt.Errorf("%q is not a tag, group, user, host, IP, CIDR, autogroup:member/tagged or *", id)
	}
	return nil
}

// parseHost reads an IP address or a CIDR prefix.
func parseHost(s string) (netip.Prefix, error) {
	if a, err := netip.ParseAddr(s); err == nil {
		return netip.PrefixFrom(a, a.BitLen()), nil
	}
	pfx, err := netip.ParsePrefix(s)
	return pfx.Masked(), err
}

// grantNode is what grants and acls look at in a node: its tags, its
// owner's login (untagged nodes), its addresses, the addresses of the
// Tailscale Services routed to it and the subnet routes it serves.
type grantNode struct {
	tags   []string
	login  string
	addrs  []netip.Prefix
	vips   []netip.Prefix
	routes []netip.Prefix
}

// prefix returns the IP or prefix id names (a host alias or a literal).
func (p *policy) prefix(id string) (netip.Prefix, bool) {
	if v, ok := p.Hosts[id]; ok {
		id = v
	}
	pfx, err := parseHost(id)
	return pfx, err == nil
}

// names reports whether id names node n, and the destinations a rule
// for it covers: n's addresses and its services' (an identity), or the
// prefix id names when it covers one of them or a route n serves.
func (p *policy) names(id string, n grantNode) ([]netip.Prefix, bool) {
	if pfx, ok := p.prefix(id); ok {
		if coversAny(pfx, append(slices.Clone(n.addrs), n.vips...), n.routes) {
			return []netip.Prefix{pfx}, true
		}
		return nil, false
	}
	if p.matches(id, n.tags, n.login) {
		return append(slices.Clone(n.addrs), n.vips...), true
	}
	return nil, false
}

// appRules are the packet filter rules that carry the grants' app
// capabilities to node self: one rule per grant that names self in dst,
// from the addresses of the nodes (or the prefixes, or "*") its src
// names, so that self's WhoIs of a source lists the capabilities. Rules
// of several grants add up, so their values merge as on Tailscale.
func (p *policy) appRules(self grantNode, nodes []grantNode) []tailcfg.FilterRule {
	var out []tailcfg.FilterRule
	for _, g := range p.Grants {
		if len(g.app) == 0 {
			continue
		}
		var dsts []netip.Prefix
		for _, id := range g.Dst {
			if d, ok := p.names(id, self); ok {
				dsts = append(dsts, d...)
			}
		}
		if len(dsts) == 0 {
			continue
		}
		srcs := p.sources(g.Src, nodes)
		if len(srcs) == 0 {
			continue
		}
		sortPrefixes(dsts)
		out = append(out, tailcfg.FilterRule{
			SrcIPs:   srcs,
			CapGrant: []tailcfg.CapGrant{{Dsts: slices.Compact(dsts), CapMap: g.app}},
		})
	}
	return out
}

// sources are the SrcIPs a grant's src resolves to among nodes.
func (p *policy) sources(src []string, nodes []grantNode) []string {
	if slices.Contains(src, "*") {
		return []string{"*"}
	}
	set := map[string]bool{}
	for _, id := range src {
		if pfx, ok := p.prefix(id); ok {
			set[pfx.String()] = true
			continue
		}
		for _, n := range nodes {
			if p.matches(id, n.tags, n.login) {
				for _, a := range n.addrs {
					set[a.String()] = true
				}
			}
		}
	}
	out := make([]string, 0, len(set))
	for s := range set {
		out = append(out, s)
	}
	sort.Strings(out)
	return out
}

// packetFilterFor is the packet filter for the node with key k, from
// testcontrol's (base), sent in each map response it gets (serveMap):
// the policy's acls and grants' ip rules and the grants' app
// capabilities (policy.packetFilter). It is computed per response, so a
// node that joins, leaves or changes tags is in the sources of every map
// sent after it; a policy change wakes every node (wakeAll).
func (t *Tailnet) packetFilterFor(k key.NodePublic, base []tailcfg.FilterRule) []tailcfg.FilterRule {
	t.routeMu.Lock()
	defer t.routeMu.Unlock()
	p := t.routes.policy
	if len(p.Grants) == 0 && !p.enforcesIP() {
		return base
	}
	self := t.Control.Node(k)
	if self == nil || t.devices.removed(k) {
		return base
	}
	services := t.store.services()
	var nodes []grantNode
	for _, n := range t.liveNodes() {
		nodes = append(nodes, t.grantNodeLocked(n, services))
	}
	return p.packetFilter(base, t.grantNodeLocked(self, services), nodes)
}

// grantNodeLocked is what the policy's rules see of n (routeMu held).
func (t *Tailnet) grantNodeLocked(n *tailcfg.Node, services []*vipService) grantNode {
	var routes []netip.Prefix
	approved := t.devices.info(n.Key).ApprovedRoutes
	for _, r := range advertisedRoutes(n) {
		if slices.Contains(approved, r) && !tsaddr.IsExitRoute(r) {
			routes = append(routes, r)
		}
	}
	return grantNode{tags: n.Tags, login: t.loginOf(n), addrs: n.Addresses,
		vips: t.serviceRoutesLocked(n.Key, services), routes: routes}
}
