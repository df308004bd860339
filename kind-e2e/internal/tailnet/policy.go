package tailnet

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/tailscale/hujson"
	"tailscale.com/net/tsaddr"
	"tailscale.com/tailcfg"
)

// DefaultPolicy is the tailnet policy devcluster starts with when it is
// given none: everyone reaches everything, and every route and exit node a
// device advertises is approved at once, and every tagged device may host
// every Tailscale Service, so nothing has to be approved by hand. A policy
// with no matching autoApprovers leaves advertised routes unapproved until
// approved through the API, as on Tailscale.
const DefaultPolicy = `// devcluster's default tailnet policy.
{
	"acls": [{"action": "accept", "src": ["*"], "dst": ["*:*"]}],
	"autoApprovers": {
		"routes": {
			"0.0.0.0/0": ["autogroup:member", "autogroup:tagged"],
			"::/0":      ["autogroup:member", "autogroup:tagged"],
		},
		"exitNode": ["autogroup:member", "autogroup:tagged"],
		// devcluster only: "*" names every Tailscale Service.
		"services": {"*": ["autogroup:tagged"]},
	},
	// Funnel for every device, as a new tailnet's policy gives it.
	"nodeAttrs": [{"target": ["autogroup:member", "autogroup:tagged"], "attr": ["funnel"]}],
}
`

// previousDefaultPolicies are the earlier versions of DefaultPolicy; a
// tailnet saved with one is given the current one, so resumed clusters
// behave like new ones.
var previousDefaultPolicies = []string{previousDefaultPolicy, secondDefaultPolicy}

// secondDefaultPolicy is DefaultPolicy before it gave every device Funnel.
const secondDefaultPolicy = `// devcluster's default tailnet policy.
{
	"acls": [{"action": "accept", "src": ["*"], "dst": ["*:*"]}],
	"autoApprovers": {
		"routes": {
			"0.0.0.0/0": ["autogroup:member", "autogroup:tagged"],
			"::/0":      ["autogroup:member", "autogroup:tagged"],
		},
		"exitNode": ["autogroup:member", "autogroup:tagged"],
		// devcluster only: "*" names every Tailscale Service.
		"services": {"*": ["autogroup:tagged"]},
	},
}
`

// previousDefaultPolicy is DefaultPolicy before it approved Tailscale
// Services.
const previousDefaultPolicy = `// devcluster's default tailnet policy.
{
	"acls": [{"action": "accept", "src": ["*"], "dst": ["*:*"]}],
	"autoApprovers": {
		"routes": {
			"0.0.0.0/0": ["autogroup:member", "autogroup:tagged"],
			"::/0":      ["autogroup:member", "autogroup:tagged"],
		},
		"exitNode": ["autogroup:member", "autogroup:tagged"],
	},
}
`

// policy is the part of a tailnet policy file devcluster acts on:
// acls and grants (packet filters and app capabilities), tagOwners (which
// tags an OAuth client may put on auth keys), autoApprovers and nodeAttrs,
// with groups and hosts to resolve names. The rest is accepted and not
// enforced.
type policy struct {
	Groups        map[string][]string `json:"groups"`
	Hosts         map[string]string   `json:"hosts"`
	TagOwners     map[string][]string `json:"tagOwners"`
	ACLs          []aclEntry          `json:"acls"`
	Grants        []grant             `json:"grants"`
	AutoApprovers struct {
		Routes   map[string][]string `json:"routes"`
		ExitNode []string            `json:"exitNode"`
		// Services maps a service ("svc:name"), the services with a tag
		// ("tag:x") or every service ("*", devcluster only) to the
		// devices that may host it.
		Services map[string][]string `json:"services"`
	} `json:"autoApprovers"`
	NodeAttrs []nodeAttr `json:"nodeAttrs"`

	routes  []routeApprover // AutoApprovers.Routes, parsed
	ipRules []ipRule        // acls and grants' ip, checked (checkACLs)
	// dir are the groups of devcluster's user directory (Config.Groups),
	// which the policy may name without defining them in groups.
	dir  map[string][]string
	text string // the HuJSON it was read from
}

// nodeAttr is one nodeAttrs entry: attributes (and app capabilities such
// as tailscale.com/app-connectors) for the nodes its target names.
type nodeAttr struct {
	Target []string                     `json:"target"`
	Attr   []string                     `json:"attr"`
	App    map[string][]json.RawMessage `json:"app"`
}

type routeApprover struct {
	prefix    netip.Prefix
	approvers []string
}

// parsePolicy reads a HuJSON policy file and checks the parts devcluster
// uses, naming the entry that is wrong. dir are the user directory's
// groups (group name -> member logins).
func parsePolicy(text string, dir map[string][]string) (*policy, error) {
	std, err := hujson.Standardize([]byte(text))
	if err != nil {
		return nil, fmt.Errorf("policy is not valid HuJSON: %w", err)
	}
	p := &policy{text: text, dir: dir}
	if err := json.Unmarshal(std, p); err != nil {
		return nil, fmt.Errorf("policy: %w", err)
	}
	for g, members := range p.Groups {
		if !strings.HasPrefix(g, "group:") {
			return nil, fmt.Errorf("policy: groups: %q does not start with group:", g)
		}
		for _, m := range members {
			if !strings.Contains(m, "@") {
				return nil, fmt.Errorf("policy: groups: %s: member %q is not a user (user@domain)", g, m)
			}
		}
	}
	check := func(where string, ids []string) error {
		for _, id := range ids {
			if err := p.checkIdentity(id); err != nil {
				return fmt.Errorf("policy: %s: %w", where, err)
			}
		}
		return nil
	}
	for r, ids := range p.AutoApprovers.Routes {
		pfx, err := netip.ParsePrefix(r)
		if err != nil {
			return nil, fmt.Errorf("policy: autoApprovers.routes: %q is not a CIDR prefix", r)
		}
		if err := check("autoApprovers.routes["+r+"]", ids); err != nil {
			return nil, err
		}
		p.routes = append(p.routes, routeApprover{prefix: pfx.Masked(), approvers: ids})
	}
	if err := check("autoApprovers.exitNode", p.AutoApprovers.ExitNode); err != nil {
		return nil, err
	}
	for svc, ids := range p.AutoApprovers.Services {
		switch {
		case svc == "*":
		case strings.HasPrefix(svc, "tag:"):
			if err := tailcfg.CheckTag(svc); err != nil {
				return nil, fmt.Errorf("policy: autoApprovers.services: %q: %w", svc, err)
			}
		default:
			if err := checkServiceName(svc); err != nil {
				return nil, fmt.Errorf("policy: autoApprovers.services: %w (keys are svc:name, tag:x or *)", err)
			}
		}
		if err := check("autoApprovers.services["+svc+"]", ids); err != nil {
			return nil, err
		}
	}
	for i, a := range p.NodeAttrs {
		for _, id := range a.Target {
			if id == "*" {
				continue
			}
			if err := p.checkIdentity(id); err != nil {
				return nil, fmt.Errorf("policy: nodeAttrs[%d].target: %w", i, err)
			}
		}
		if len(a.Attr) == 0 && len(a.App) == 0 {
			return nil, fmt.Errorf("policy: nodeAttrs[%d]: neither attr nor app is set", i)
		}
	}
	if err := p.checkGrants(); err != nil {
		return nil, err
	}
	if err := p.checkACLs(); err != nil {
		return nil, err
	}
	if err := p.checkTagOwners(); err != nil {
		return nil, err
	}
	return p, nil
}

// checkIdentity accepts what an approver or target may be in devcluster:
// a tag, a group of the policy, a user, autogroup:member (untagged
// devices) or autogroup:tagged (tagged devices).
func (p *policy) checkIdentity(id string) error {
	switch {
	case strings.HasPrefix(id, "tag:") && len(id) > 4:
	case id == "autogroup:member", id == "autogroup:tagged":
	case strings.HasPrefix(id, "group:"):
		_, inPolicy := p.Groups[id]
		if _, inDir := p.dir[id]; !inPolicy && !inDir {
			return fmt.Errorf("group %q is not defined in groups (nor in devcluster's user directory)", id)
		}
	case strings.Contains(id, "@"):
	default:
		return fmt.Errorf("%q is not a tag, group, user or autogroup:member/tagged", id)
	}
	return nil
}

// matches reports whether identity id names the device with these tags
// owned by login (tagged devices are owned by no user).
func (p *policy) matches(id string, tags []string, login string) bool {
	switch {
	case id == "*":
		return true
	case strings.HasPrefix(id, "tag:"):
		return slices.Contains(tags, id)
	case id == "autogroup:tagged":
		return len(tags) > 0
	case id == "autogroup:member":
		return len(tags) == 0
	case strings.HasPrefix(id, "group:"):
		return len(tags) == 0 && (slices.Contains(p.Groups[id], login) || slices.Contains(p.dir[id], login))
	default:
		return len(tags) == 0 && id == login
	}
}

func (p *policy) anyMatches(ids, tags []string, login string) bool {
	return slices.ContainsFunc(ids, func(id string) bool { return p.matches(id, tags, login) })
}

// autoApproved returns the routes of advertised that the policy's
// autoApprovers approve for the device: a subnet route when a routes entry
// covers it and names the device, the exit routes (0.0.0.0/0, ::/0) when
// exitNode names it.
func (p *policy) autoApproved(advertised []netip.Prefix, tags []string, login string) []netip.Prefix {
	var out []netip.Prefix
	for _, r := range advertised {
		if tsaddr.IsExitRoute(r) {
			if p.anyMatches(p.AutoApprovers.ExitNode, tags, login) {
				out = append(out, r)
			}
			continue
		}
		for _, a := range p.routes {
			if a.prefix.Addr().BitLen() == r.Addr().BitLen() && a.prefix.Bits() <= r.Bits() && a.prefix.Contains(r.Addr()) &&
				p.anyMatches(a.approvers, tags, login) {
				out = append(out, r)
				break
			}
		}
	}
	return out
}

// serviceApproved reports whether the device with these tags may host the
// service name (tagged svcTags): an autoApprovers.services entry naming
// the service, one of its tags or "*" names the device. Only tagged
// devices host services, as on Tailscale.
func (p *policy) serviceApproved(name string, svcTags, tags []string) bool {
	if len(tags) == 0 {
		return false
	}
	for key, ids := range p.AutoApprovers.Services {
		if (key == "*" || key == name || slices.Contains(svcTags, key)) && p.anyMatches(ids, tags, "") {
			return true
		}
	}
	return false
}

// capMap is the capability map control sends the device: each nodeAttrs
// entry whose target names it adds its attr names (no value) and its app
// capabilities (their values, in policy order), as Tailscale's control
// plane delivers node attributes such as tailscale.com/app-connectors.
func (p *policy) capMap(tags []string, login string) tailcfg.NodeCapMap {
	var m tailcfg.NodeCapMap
	for _, a := range p.NodeAttrs {
		if !p.anyMatches(a.Target, tags, login) {
			continue
		}
		if m == nil {
			m = tailcfg.NodeCapMap{}
		}
		for _, name := range a.Attr {
			if _, ok := m[tailcfg.NodeCapability(name)]; !ok {
				m[tailcfg.NodeCapability(name)] = nil
			}
		}
		for name, vals := range a.App {
			c := tailcfg.NodeCapability(name)
			for _, v := range vals {
				m[c] = append(m[c], tailcfg.RawMessage(v))
			}
		}
	}
	return m
}
