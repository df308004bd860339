package headscale

import (
	"encoding/json"
	"maps"
	"slices"
	"strings"
)

// headscaleOwner reports whether Headscale v0.27.1 takes s as a tag owner
// or an auto-approver (besides tags for the latter): a user (with an "@")
// or a group.
func headscaleOwner(s string) bool {
	return strings.Contains(s, "@") || strings.HasPrefix(s, "group:")
}

// tagOwners keeps the users and groups among each tag's owners.
func (t *translation) tagOwners(raw json.RawMessage) error {
	var in map[string][]string
	if err := decode(raw, &in); err != nil {
		return err
	}
	out := map[string][]string{}
	for _, tag := range slices.Sorted(maps.Keys(in)) {
		kept := []string{}
		for _, owner := range in[tag] {
			if headscaleOwner(owner) {
				kept = append(kept, owner)
				continue
			}
			t.note("tagOwners[%s]: owner %s dropped: Headscale v0.27.1 takes only users and groups as tag owners; "+
				"on Headscale the tag is applied through pre-auth keys made with the API key (the admin's power), so no one else gains it", tag, owner)
		}
		out[tag] = kept
	}
	t.out["tagOwners"] = out
	return nil
}

// approvers keeps the approvers Headscale takes: users, groups and tags.
func (t *translation) approvers(where string, in []string) []string {
	kept := []string{}
	for _, a := range in {
		if headscaleOwner(a) || strings.HasPrefix(a, "tag:") {
			kept = append(kept, a)
			continue
		}
		t.note("%s: approver %s dropped: Headscale v0.27.1 takes only users, groups and tags as auto-approvers", where, a)
	}
	return kept
}

// autoApprovers keeps routes and exitNode; Headscale has no services.
func (t *translation) autoApprovers(raw json.RawMessage) error {
	var in map[string]json.RawMessage
	if err := decode(raw, &in); err != nil {
		return err
	}
	out := map[string]any{}
	for _, key := range slices.Sorted(maps.Keys(in)) {
		switch key {
		case "routes":
			var routes map[string][]string
			if err := decode(in[key], &routes); err != nil {
				return err
			}
			kept := map[string][]string{}
			for _, prefix := range slices.Sorted(maps.Keys(routes)) {
				kept[prefix] = t.approvers("autoApprovers.routes["+prefix+"]", routes[prefix])
			}
			out[key] = kept
		case "exitNode":
			var approvers []string
			if err := decode(in[key], &approvers); err != nil {
				return err
			}
			out[key] = t.approvers("autoApprovers.exitNode", approvers)
		case "services":
			t.note("autoApprovers.services dropped: Headscale has no Tailscale Services (the operator refuses what needs them)")
		default:
			t.note("autoApprovers.%s dropped: Headscale v0.27.1 approves only routes and exit nodes", key)
		}
	}
	t.out["autoApprovers"] = out
	return nil
}

// nodeAttr is one nodeAttrs entry.
type nodeAttr struct {
	Target []string        `json:"target"`
	Attr   []string        `json:"attr"`
	App    json.RawMessage `json:"app"`
}

// nodeAttrs are all dropped, each with what it gave.
func (t *translation) nodeAttrs(raw json.RawMessage) error {
	var in []nodeAttr
	if err := decode(raw, &in); err != nil {
		return err
	}
	for i, a := range in {
		targets := strings.Join(a.Target, ",")
		for _, attr := range a.Attr {
			if attr == "funnel" {
				t.note("nodeAttrs[%d]: funnel for %s dropped: Headscale has no Funnel (an Ingress asking for it gets a Warning Event)", i, targets)
			} else {
				t.note("nodeAttrs[%d]: attribute %s for %s dropped: Headscale v0.27.1 has no node attributes", i, attr, targets)
			}
		}
		if len(a.App) > 0 {
			t.note("nodeAttrs[%d]: app capabilities for %s dropped: Headscale delivers no app capabilities", i, targets)
		}
	}
	return nil
}

// addGroups adds the directory's groups to the policy's: a group both
// define has the members of both, as on devcluster's own control server.
func (t *translation) addGroups(dir map[string][]string) {
	if len(dir) == 0 {
		return
	}
	groups, _ := t.out["groups"].(map[string]any)
	if groups == nil {
		groups = map[string]any{}
	}
	for _, name := range slices.Sorted(maps.Keys(dir)) {
		members := stringList(groups[name])
		var added []string
		for _, m := range dir[name] {
			if !slices.Contains(members, m) {
				members, added = append(members, m), append(added, m)
			}
		}
		groups[name] = members
		if len(added) > 0 {
			t.note("groups[%s]: %s, from the user directory (--group)", name, strings.Join(added, ","))
		}
	}
	t.out["groups"] = groups
}

// declareTags adds to tagOwners, without owners, the tags that acls and
// autoApprovers name but tagOwners lacks: Headscale refuses such a policy,
// and a tag without owners is one only the API key can apply.
func (t *translation) declareTags() {
	named := map[string]bool{}
	name := func(aliases []string) {
		for _, a := range aliases {
			if strings.HasPrefix(a, "tag:") {
				named[a] = true
			}
		}
	}
	for _, rule := range t.acls {
		r, _ := rule.(map[string]any)
		name(stringList(r["src"]))
		for _, dst := range stringList(r["dst"]) {
			if i := strings.LastIndexByte(dst, ':'); i > 0 {
				name([]string{dst[:i]}) // "tag:k8s:443"
			}
		}
	}
	if aa, ok := t.out["autoApprovers"].(map[string]any); ok {
		name(stringList(aa["exitNode"]))
		routes, _ := aa["routes"].(map[string][]string)
		for _, approvers := range routes {
			name(approvers)
		}
	}
	owners, _ := t.out["tagOwners"].(map[string][]string)
	if owners == nil {
		owners = map[string][]string{}
	}
	added := false
	for _, tag := range slices.Sorted(maps.Keys(named)) {
		if _, ok := owners[tag]; ok {
			continue
		}
		owners[tag], added = []string{}, true
		t.note("tagOwners[%s]: declared without owners, since the policy names it and Headscale wants every tag declared", tag)
	}
	if added || len(owners) > 0 {
		t.out["tagOwners"] = owners
	}
}

// stringList reads a JSON list of strings decoded as []any or []string.
func stringList(v any) []string {
	switch v := v.(type) {
	case []string:
		return v
	case []any:
		var out []string
		for _, x := range v {
			if s, ok := x.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}
