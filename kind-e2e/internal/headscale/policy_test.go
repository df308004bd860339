package headscale

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// seedPolicy reads one of the seed's four policy blocks
// (examples/seed/policy, verbatim from the story).
func seedPolicy(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "..", "examples", "seed", "policy", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// wantPolicy checks that got is the JSON of want and that the notes hold
// each of notes (as parts).
func wantPolicy(t *testing.T, got Policy, want string, notes ...string) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal([]byte(got.JSON), &g); err != nil {
		t.Fatalf("translated policy is not JSON: %v\n%s", err, got.JSON)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(g, w) {
		t.Errorf("translated:\n%s\nwant:\n%s", got.JSON, want)
	}
	for _, n := range notes {
		if !slices.ContainsFunc(got.Notes, func(s string) bool { return strings.Contains(s, n) }) {
			t.Errorf("no note with %q in:\n%s", n, strings.Join(got.Notes, "\n"))
		}
	}
	if len(got.Notes) != len(notes) {
		t.Errorf("%d notes, want %d:\n%s", len(got.Notes), len(notes), strings.Join(got.Notes, "\n"))
	}
}

// The seed's four policy blocks: the tag owners lose the owners Headscale
// cannot take (autogroup:admin, a tag) and keep the tags declared; the
// route and exit-node approvers stay, with their tag declared; the services
// approver goes (no Tailscale Services); the least-privilege grant becomes
// an ACL accept rule for tcp:443 from group:dev (defined from the user
// directory) to tag:k8s, nothing else allowed.
func TestTranslateSeedPolicies(t *testing.T) {
	dir := map[string][]string{"group:dev": {"alice@example.com"}}
	for _, tc := range []struct {
		file, want string
		notes      []string
	}{
		{"1-tag-owners.json", `{"tagOwners": {"tag:k8s": [], "tag:k8s-operator": []}}`,
			[]string{"tagOwners[tag:k8s]: owner tag:k8s-operator dropped", "tagOwners[tag:k8s-operator]: owner autogroup:admin dropped"}},
		{"2-route-approvers.json", `{"autoApprovers": {"routes": {"10.42.0.0/16": ["tag:k8s"]}, "exitNode": ["tag:k8s"]}, "tagOwners": {"tag:k8s": []}}`,
			[]string{"tagOwners[tag:k8s]: declared without owners"}},
		{"3-service-approvers.json", `{"autoApprovers": {}}`,
			[]string{"autoApprovers.services dropped: Headscale has no Tailscale Services"}},
		{"4-grants.json", `{
			"tagOwners": {"tag:k8s": [], "tag:k8s-operator": []},
			"autoApprovers": {},
			"acls": [{"action": "accept", "src": ["group:dev"], "dst": ["tag:k8s:443"], "proto": "tcp"}],
			"groups": {"group:dev": ["alice@example.com"]}}`,
			[]string{"owner tag:k8s-operator dropped", "owner autogroup:admin dropped", "autoApprovers.services dropped",
				"grants[0]: ip tcp:443 from group:dev to tag:k8s is an ACL accept rule", "groups[group:dev]: alice@example.com, from the user directory"}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			got, err := TranslatePolicy(seedPolicy(t, tc.file), dir)
			if err != nil {
				t.Fatal(err)
			}
			if tc.file != "4-grants.json" {
				// Only the grant block names a group; the others get
				// the directory's groups all the same.
				tc.want = strings.TrimSuffix(tc.want, "}") + `, "groups": {"group:dev": ["alice@example.com"]}}`
				tc.notes = append(tc.notes, "groups[group:dev]")
			}
			wantPolicy(t, got, tc.want, tc.notes...)
		})
	}
}

// What else Headscale cannot express: funnel and other node attributes are
// dropped with a note each, a grant's app part is dropped and its ip part
// kept (bare ports, several protocols, "*"), a grant with via is dropped
// whole, the policy's own acls are kept and its groups get the
// directory's members too, tests are dropped, and
// an empty policy stays empty (allow all).
func TestTranslatePolicyDropsWhatHeadscaleLacks(t *testing.T) {
	got, err := TranslatePolicy(`{
		// HuJSON, as Tailscale's policy files.
		"groups": {"group:dev": ["bob@example.com"]},
		"acls": [{"action": "accept", "src": ["autogroup:member"], "dst": ["autogroup:self:*"]}],
		"grants": [
			{"src": ["group:dev"], "dst": ["tag:k8s", "10.0.0.0/8"], "ip": ["80", "tcp:443", "udp:53", "tcp:8443"],
			 "app": {"tailscale.com/cap/kubernetes": [{"impersonate": {"groups": ["system:masters"]}}]}},
			{"src": ["*"], "dst": ["tag:db"], "ip": ["*"]},
			{"src": ["*"], "dst": ["tag:k8s-operator"], "app": {"tailscale.com/cap/kubernetes": [{}]}},
			{"src": ["*"], "dst": ["10.1.0.0/16"], "ip": ["*"], "via": ["tag:router"]},
		],
		"nodeAttrs": [{"target": ["tag:k8s"], "attr": ["funnel", "mullvad"]}],
		"tests": [{"src": "bob@example.com", "accept": ["tag:k8s:443"]}],
	}`, map[string][]string{"group:dev": {"alice@example.com"}, "group:ops": {"carol@example.com"}})
	if err != nil {
		t.Fatal(err)
	}
	wantPolicy(t, got, `{
		"groups": {"group:dev": ["bob@example.com", "alice@example.com"], "group:ops": ["carol@example.com"]},
		"acls": [
			{"action": "accept", "src": ["autogroup:member"], "dst": ["autogroup:self:*"]},
			{"action": "accept", "src": ["group:dev"], "dst": ["tag:k8s:80", "10.0.0.0/8:80"]},
			{"action": "accept", "src": ["group:dev"], "dst": ["tag:k8s:443,8443", "10.0.0.0/8:443,8443"], "proto": "tcp"},
			{"action": "accept", "src": ["group:dev"], "dst": ["tag:k8s:53", "10.0.0.0/8:53"], "proto": "udp"},
			{"action": "accept", "src": ["*"], "dst": ["tag:db:*"]}],
		"tagOwners": {"tag:db": [], "tag:k8s": []}}`,
		"grants[0]: app capabilities dropped", "grants[0]: ip 80,tcp:443,udp:53,tcp:8443", "grants[1]: ip *",
		"grants[2]: app capabilities dropped", "grants[3] dropped: Headscale's ACLs cannot express via",
		"nodeAttrs[0]: funnel for tag:k8s dropped: Headscale has no Funnel", "nodeAttrs[0]: attribute mullvad for tag:k8s dropped",
		"tests dropped", "groups[group:dev]: alice@example.com", "groups[group:ops]", "tagOwners[tag:db]: declared", "tagOwners[tag:k8s]: declared")

	if empty, err := TranslatePolicy("  ", nil); err != nil || empty.JSON != "" || len(empty.Notes) != 0 {
		t.Fatalf("an empty policy: %+v, %v", empty, err)
	}
	for _, bad := range []string{`{"grants": [{"src": ["*"], "dst": ["*"]}]}`, `{"grants": [{"src": ["*"], "dst": ["*"], "ip": ["*:443"]}]}`, `{`} {
		if _, err := TranslatePolicy(bad, nil); err == nil {
			t.Errorf("accepted %s", bad)
		}
	}
}
