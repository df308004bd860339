package headscale

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/tailscale/hujson"
)

// Policy is a Tailscale policy file translated for Headscale v0.27.1.
type Policy struct {
	// JSON is what Headscale loads; empty when the input was empty (a new
	// tailnet: everyone reaches everything).
	JSON string
	// Notes say, one sentence each, what was rewritten or dropped and why.
	Notes []string
}

// TranslatePolicy rewrites a Tailscale policy file (HuJSON) into one
// Headscale v0.27.1's policy parser accepts, keeping its meaning where
// Headscale can express it and dropping, with a note, what it cannot:
//
//   - grants: the ip part of a grant is an ACL accept rule with the same
//     sources, destinations and ports (one rule per protocol); an app part
//     is dropped (Headscale delivers no app capabilities), and a grant with
//     via or a posture is dropped whole, since leaving the condition out
//     would widen it;
//   - tagOwners: Headscale takes only users and groups as owners; tags and
//     autogroups (autogroup:admin) are dropped, the tag staying declared.
//     On Headscale tags come from pre-auth keys made with the API key, the
//     admin's power, so the tag stays as closed to other users as before;
//   - tags that acls or autoApprovers name are declared in tagOwners
//     (without owners) when missing, as Headscale insists;
//   - autoApprovers: routes and exitNode are kept (autogroup approvers
//     dropped); services are dropped (Headscale has no Tailscale Services);
//   - nodeAttrs are dropped (Headscale has no Funnel, no node attributes),
//     and so are tests and sections Headscale does not know;
//   - groups gets the directory's groups (devcluster up --group), a group
//     the policy defines too getting the members of both.
//
// Without acls and without grants with ip, the result has no acls, which
// Headscale, like devcluster's own control server, takes as allow-all.
func TranslatePolicy(text string, groups map[string][]string) (Policy, error) {
	if strings.TrimSpace(text) == "" {
		return Policy{}, nil
	}
	std, err := hujson.Standardize([]byte(text))
	if err != nil {
		return Policy{}, fmt.Errorf("policy: %w", err)
	}
	var in map[string]json.RawMessage
	if err := json.Unmarshal(std, &in); err != nil {
		return Policy{}, fmt.Errorf("policy: %w", err)
	}
	t := &translation{out: map[string]any{}}
	for _, key := range slices.Sorted(maps.Keys(in)) {
		if err := t.section(key, in[key]); err != nil {
			return Policy{}, fmt.Errorf("policy: %s: %w", key, err)
		}
	}
	t.addGroups(groups)
	t.declareTags()
	b, err := json.MarshalIndent(t.out, "", "  ")
	if err != nil {
		return Policy{}, fmt.Errorf("policy: %w", err)
	}
	return Policy{JSON: string(b), Notes: t.notes}, nil
}

// translation is TranslatePolicy's work in progress.
type translation struct {
	out   map[string]any
	notes []string
	acls  []any // kept ACL rules, then those made from grants
	// hasACLs is whether the input had an acls section or a grant with ip.
	hasACLs bool
}

func (t *translation) note(format string, args ...any) {
	t.notes = append(t.notes, fmt.Sprintf(format, args...))
}

// section translates one top-level section.
func (t *translation) section(key string, raw json.RawMessage) error {
	switch key {
	case "groups", "hosts", "ssh":
		var v any
		if err := decode(raw, &v); err != nil {
			return err
		}
		t.out[key] = v
	case "acls":
		var v []any
		if err := decode(raw, &v); err != nil {
			return err
		}
		t.acls, t.hasACLs = append(v, t.acls...), true
		t.out[key] = t.acls
	case "grants":
		return t.grants(raw)
	case "tagOwners":
		return t.tagOwners(raw)
	case "autoApprovers":
		return t.autoApprovers(raw)
	case "nodeAttrs":
		return t.nodeAttrs(raw)
	case "tests", "sshTests":
		t.note("%s dropped: Headscale does not run policy tests (the rules are unchanged)", key)
	default:
		t.note("%s dropped: Headscale v0.27.1 has no such policy section", key)
	}
	return nil
}

func decode(raw json.RawMessage, v any) error {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	return d.Decode(v)
}

// grant is the part of a Tailscale grant Headscale's ACLs can hold.
type grant struct {
	Src []string        `json:"src"`
	Dst []string        `json:"dst"`
	IP  []string        `json:"ip"`
	App json.RawMessage `json:"app"`
}

// grants turns each grant's ip part into ACL accept rules.
func (t *translation) grants(raw json.RawMessage) error {
	var list []map[string]json.RawMessage
	if err := decode(raw, &list); err != nil {
		return err
	}
	for i, g := range list {
		var extra []string
		for k := range g {
			if k != "src" && k != "dst" && k != "ip" && k != "app" {
				extra = append(extra, k)
			}
		}
		if len(extra) > 0 {
			slices.Sort(extra)
			t.note("grants[%d] dropped: Headscale's ACLs cannot express %s, and leaving it out would widen the grant", i, strings.Join(extra, ", "))
			continue
		}
		b, _ := json.Marshal(g)
		var gr grant
		if err := json.Unmarshal(b, &gr); err != nil {
			return fmt.Errorf("grants[%d]: %w", i, err)
		}
		if len(gr.App) > 0 {
			t.note("grants[%d]: app capabilities dropped: Headscale delivers no app capabilities", i)
		}
		if len(gr.IP) == 0 {
			if len(gr.App) == 0 {
				return fmt.Errorf("grants[%d]: neither ip nor app", i)
			}
			continue
		}
		rules, err := aclRules(gr)
		if err != nil {
			return fmt.Errorf("grants[%d]: %w", i, err)
		}
		t.acls, t.hasACLs = append(t.acls, rules...), true
		t.out["acls"] = t.acls
		t.note("grants[%d]: ip %s from %s to %s is an ACL accept rule", i, strings.Join(gr.IP, ","), strings.Join(gr.Src, ","), strings.Join(gr.Dst, ","))
	}
	return nil
}

// aclRules are the ACL accept rules of a grant's ip part: one per protocol,
// every destination with that protocol's ports. "*" is every protocol and
// port, "443" or "80,443" or "8000-8999" ports of every protocol, and
// "tcp:443" ports of one protocol.
func aclRules(g grant) ([]any, error) {
	ports := map[string][]string{} // protocol ("" for all) -> ports
	var protos []string
	for _, ip := range g.IP {
		proto, p, ok := strings.Cut(ip, ":")
		if !ok {
			proto, p = "", ip
		}
		if p == "" || proto == "*" {
			return nil, fmt.Errorf("ip %q: want *, PORTS or PROTO:PORTS", ip)
		}
		if _, seen := ports[proto]; !seen {
			protos = append(protos, proto)
		}
		ports[proto] = append(ports[proto], p)
	}
	var rules []any
	for _, proto := range protos {
		p := strings.Join(ports[proto], ",")
		if slices.Contains(ports[proto], "*") {
			p = "*"
		}
		var dst []any
		for _, d := range g.Dst {
			dst = append(dst, d+":"+p)
		}
		rule := map[string]any{"action": "accept", "src": g.Src, "dst": dst}
		if proto != "" {
			rule["proto"] = proto
		}
		rules = append(rules, rule)
	}
	return rules, nil
}
