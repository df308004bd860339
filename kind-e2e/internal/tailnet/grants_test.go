package tailnet

import (
	"context"
	"io"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/log"
	"tailscale.com/ipn/ipnstate"
	"tailscale.com/tailcfg"
	"tailscale.com/tsnet"
)

const (
	capK8s = tailcfg.PeerCapability("tailscale.com/cap/kubernetes")
	capWeb = tailcfg.PeerCapability("example.com/cap/web")
)

// addrsOf returns node's tailnet IPv4 and IPv6 addresses.
func addrsOf(ctx context.Context, t *testing.T, node *tsnet.Server) []netip.Addr {
	t.Helper()
	st := waitStatus(ctx, t, node, "own addresses", func(st *ipnstate.Status) bool { return len(st.TailscaleIPs) == 2 })
	return st.TailscaleIPs
}

// capsOf is what dst's WhoIs says about a connection from src's address
// (IPv4 and IPv6 must agree): capability -> values as compact JSON.
func capsOf(ctx context.Context, t *testing.T, dst *tsnet.Server, src []netip.Addr) (map[string][]string, bool) {
	t.Helper()
	lc, err := dst.LocalClient()
	if err != nil {
		t.Fatal(err)
	}
	var first map[string][]string
	for i, a := range src {
		w, err := lc.WhoIs(ctx, netip.AddrPortFrom(a, 12345).String())
		if err != nil {
			return nil, false
		}
		m := map[string][]string{}
		for c, vals := range w.CapMap {
			if c != capK8s && c != capWeb {
				continue // testcontrol's own grants (ingress)
			}
			for _, v := range vals {
				m[string(c)] = append(m[string(c)], compact([]byte(v)))
			}
			slices.Sort(m[string(c)])
		}
		if i == 0 {
			first = m
		} else if !jsonEqual(first, m) {
			return nil, false
		}
	}
	return first, true
}

// waitCaps polls dst's WhoIs of src until its capabilities are want.
func waitCaps(ctx context.Context, t *testing.T, what string, dst *tsnet.Server, src []netip.Addr, want map[string][]string) {
	t.Helper()
	for _, vals := range want {
		slices.Sort(vals)
	}
	var got map[string][]string
	for {
		var ok bool
		if got, ok = capsOf(ctx, t, dst, src); ok && jsonEqual(got, want) {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s: %v; WhoIs capabilities %v, want %v", what, ctx.Err(), got, want)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// A grant's app capabilities reach the destination as on Tailscale: b's
// WhoIs of a connection from a (tag:a) lists tailscale.com/cap/kubernetes
// with exactly the granted values, and of one from the user's device the
// user's grant; a node no src names gets nothing, and a node no dst names
// sees nothing. A grant with only ip changes nothing.
func TestGrantGivesAppCapability(t *testing.T) {
	tn := startWithPolicy(t, `{
		"grants": [
			{"src": ["tag:a"], "dst": ["tag:b"], "ip": ["tcp:443"],
			 "app": {"tailscale.com/cap/kubernetes": [{"impersonate": {"groups": ["ts:e2e-test-proxy"]}}]}},
			{"src": ["devcluster@test.ts.net"], "dst": ["tag:b"],
			 "app": {
				"tailscale.com/cap/kubernetes": [{"impersonate": {"groups": ["users"]}}],
				"example.com/cap/web": [{"role": "admin"}, {"role": "viewer"}],
			 }},
			{"src": ["*"], "dst": ["*"], "ip": ["*"]},
		],
	}`)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	a := join(ctx, t, tn, "a", "tag:a")
	b := join(ctx, t, tn, "b", "tag:b")
	c := join(ctx, t, tn, "c", "tag:c")
	user := join(ctx, t, tn, "user")
	aIPs, cIPs, userIPs := addrsOf(ctx, t, a), addrsOf(ctx, t, c), addrsOf(ctx, t, user)
	waitCaps(ctx, t, "b's WhoIs of a", b, aIPs, map[string][]string{
		string(capK8s): {`{"impersonate":{"groups":["ts:e2e-test-proxy"]}}`},
	})
	waitCaps(ctx, t, "b's WhoIs of the user's device", b, userIPs, map[string][]string{
		string(capK8s): {`{"impersonate":{"groups":["users"]}}`},
		string(capWeb): {`{"role":"admin"}`, `{"role":"viewer"}`},
	})
	// c is in no src, a is in no dst: both maps are already there (a's
	// and c's caps from b are in b's map, which carries them all).
	waitCaps(ctx, t, "b's WhoIs of c", b, cIPs, map[string][]string{})
	waitCaps(ctx, t, "a's WhoIs of the user's device", a, userIPs, map[string][]string{})
	waitCaps(ctx, t, "c's WhoIs of a", c, aIPs, map[string][]string{})
}

// Grants add up: two grants naming the same source and destination merge
// their values, as on Tailscale; "*" and autogroup:tagged in src, a
// group, a host alias and an IP in dst work.
func TestGrantsMerge(t *testing.T) {
	tn := startWithPolicy(t, `{
		"groups": {"group:dev": ["devcluster@test.ts.net"]},
		"hosts": {"b-host": "100.64.0.2"},
		"grants": [
			{"src": ["tag:a"], "dst": ["tag:b"], "app": {"tailscale.com/cap/kubernetes": [{"impersonate": {"groups": ["one"]}}]}},
			{"src": ["*"], "dst": ["tag:b"], "app": {"tailscale.com/cap/kubernetes": [{"impersonate": {"groups": ["two"]}}]}},
			{"src": ["autogroup:tagged"], "dst": ["b-host"], "app": {"example.com/cap/web": [{"host": true}]}},
			{"src": ["tag:a"], "dst": ["100.64.0.3"], "app": {"example.com/cap/web": [{"ip": true}]}},
			{"src": ["tag:a"], "dst": ["group:dev"], "app": {"example.com/cap/web": [{"group": true}]}},
		],
	}`)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	a := join(ctx, t, tn, "a", "tag:a") // 100.64.0.1
	b := join(ctx, t, tn, "b", "tag:b") // 100.64.0.2
	c := join(ctx, t, tn, "c", "tag:c") // 100.64.0.3
	user := join(ctx, t, tn, "user")
	if b, c := addrsOf(ctx, t, b)[0], addrsOf(ctx, t, c)[0]; b != netip.MustParseAddr("100.64.0.2") || c != netip.MustParseAddr("100.64.0.3") {
		t.Fatalf("b is %v, c %v; the policy's host and IP assume 100.64.0.2 and .3", b, c)
	}
	aIPs, cIPs, userIPs := addrsOf(ctx, t, a), addrsOf(ctx, t, c), addrsOf(ctx, t, user)
	waitCaps(ctx, t, "b's WhoIs of a: both grants", b, aIPs, map[string][]string{
		string(capK8s): {`{"impersonate":{"groups":["one"]}}`, `{"impersonate":{"groups":["two"]}}`},
		string(capWeb): {`{"host":true}`},
	})
	waitCaps(ctx, t, "b's WhoIs of c: the * grant", b, cIPs, map[string][]string{
		string(capK8s): {`{"impersonate":{"groups":["two"]}}`},
		string(capWeb): {`{"host":true}`},
	})
	waitCaps(ctx, t, "b's WhoIs of the user's device: untagged", b, userIPs, map[string][]string{
		string(capK8s): {`{"impersonate":{"groups":["two"]}}`},
	})
	waitCaps(ctx, t, "c's WhoIs of a: by IP", c, aIPs, map[string][]string{string(capWeb): {`{"ip":true}`}})
	waitCaps(ctx, t, "the user's WhoIs of a: by group", user, aIPs, map[string][]string{string(capWeb): {`{"group":true}`}})
}

// A policy set through the API takes effect on running nodes: a grant
// added gives the capability, a changed grant its new values, a node
// joining later under src gets it too, and a grant removed takes it away.
func TestGrantPolicyChangeIsLive(t *testing.T) {
	tn := startWithPolicy(t, noApprovers)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	api := client0(t, tn)
	a := join(ctx, t, tn, "a", "tag:a")
	b := join(ctx, t, tn, "b", "tag:b")
	aIPs := addrsOf(ctx, t, a)
	waitStatus(ctx, t, b, "b sees a", func(st *ipnstate.Status) bool { return peerNamed(st, "a") != nil })
	waitCaps(ctx, t, "no grant yet", b, aIPs, map[string][]string{})

	grant := func(group string) string {
		return `{"grants": [{"src": ["tag:a"], "dst": ["tag:b"],
			"app": {"tailscale.com/cap/kubernetes": [{"impersonate": {"groups": ["` + group + `"]}}]}}]}`
	}
	if err := api.PolicyFile().Set(ctx, grant("first"), ""); err != nil {
		t.Fatal(err)
	}
	waitCaps(ctx, t, "the grant added", b, aIPs, map[string][]string{string(capK8s): {`{"impersonate":{"groups":["first"]}}`}})
	if err := api.PolicyFile().Set(ctx, grant("second"), ""); err != nil {
		t.Fatal(err)
	}
	waitCaps(ctx, t, "the grant changed", b, aIPs, map[string][]string{string(capK8s): {`{"impersonate":{"groups":["second"]}}`}})
	late := join(ctx, t, tn, "late", "tag:a")
	waitCaps(ctx, t, "a node joining under src", b, addrsOf(ctx, t, late), map[string][]string{string(capK8s): {`{"impersonate":{"groups":["second"]}}`}})
	if err := api.PolicyFile().Set(ctx, noApprovers, ""); err != nil {
		t.Fatal(err)
	}
	waitCaps(ctx, t, "the grant removed", b, aIPs, map[string][]string{})
}

// A bad grant is refused at start and through the API with the entry that
// is wrong.
func TestBadGrantIsRefused(t *testing.T) {
	for _, tc := range []struct{ policy, want string }{
		{`{"grants": [{"src": ["*"], "dst": ["tag:b"], "app": {"tailscale.com/cap/kubernetes": {"impersonate": {}}}}]}`,
			`policy: grants[0].app: tailscale.com/cap/kubernetes: the values must be a JSON array of objects, got {"impersonate":{}}`},
		{`{"grants": [{"src": ["*"], "dst": ["tag:b"], "app": {"tailscale.com/cap/kubernetes": [{}, "admin"]}}]}`,
			`policy: grants[0].app: tailscale.com/cap/kubernetes[1]: the values must be JSON objects, got "admin"`},
		{`{"grants": [{"src": ["*"], "dst": ["tag:b"], "app": {"kubernetes": [{}]}}]}`,
			`policy: grants[0].app: capability name "kubernetes" is not of the form domain/path`},
		{`{"grants": [{"src": ["group:nope"], "dst": ["tag:b"], "ip": ["*"]}]}`,
			`policy: grants[0].src: group "group:nope" is not defined in groups`},
		{`{"grants": [{"src": ["*"], "dst": ["b"], "ip": ["*"]}]}`,
			`policy: grants[0].dst: "b" is not a tag, group, user, host, IP, CIDR`},
		{`{"tagOwners": {"tag:a": []}, "grants": [{"src": ["tag:a"], "dst": ["tag:b"], "ip": ["*"]}]}`,
			`policy: grants[0].dst: tag "tag:b" is not defined in tagOwners`},
		{`{"grants": [{"src": ["*"], "dst": ["autogroup:self"], "ip": ["*"]}]}`,
			`policy: grants[0].dst: "autogroup:self" is not supported by devcluster`},
		{`{"grants": [{"src": ["*"], "dst": ["tag:b"]}]}`, `policy: grants[0]: neither ip nor app is set`},
		{`{"grants": [{"dst": ["tag:b"], "ip": ["*"]}]}`, `policy: grants[0]: src is empty`},
		{`{"hosts": {"db": "10.0.0.300"}}`, `policy: hosts[db]: "10.0.0.300" is not an IP address or CIDR prefix`},
	} {
		_, err := Start(t.Context(), Config{StateFile: filepath.Join(t.TempDir(), "s.json"), Addr: "127.0.0.1:0",
			MagicDNSDomain: "test.ts.net", Logger: log.New(io.Discard), Policy: tc.policy})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("policy %s: err %v, want %q", tc.policy, err, tc.want)
		}
	}
	tn := startWithPolicy(t, noApprovers)
	err := client0(t, tn).PolicyFile().Set(t.Context(), `{"grants": [{"src": ["*"], "dst": ["tag:b"], "app": {"tailscale.com/cap/kubernetes": ["admin"]}}]}`, "")
	if err == nil || !strings.Contains(err.Error(), `tailscale.com/cap/kubernetes[0]: the values must be JSON objects, got "admin"`) {
		t.Fatalf("bad grant through the API: %v", err)
	}
	raw, err := client0(t, tn).PolicyFile().Raw(t.Context())
	if err != nil || raw.HuJSON != noApprovers {
		t.Fatalf("policy after a refused one = %+v, %v; want it unchanged", raw, err)
	}
}

// The official operator's e2e policy (cmd/k8s-operator/e2e/acl.hujson,
// verbatim) is accepted, and its grant reaches the operator's device: a
// tag:k8s client has tailscale.com/cap/kubernetes with the e2e group.
func TestOfficialE2EPolicyGrant(t *testing.T) {
	tn := startWithPolicy(t, `// To run the e2e tests against a tailnet, ensure its access controls are a
// superset of the following:
{
	"tagOwners": {
		"tag:k8s-operator": [],
		"tag:k8s":          ["tag:k8s-operator"],
		"tag:k8s-recorder": ["tag:k8s-operator"],
	},
	"autoApprovers": {
		// Could be relaxed if we coordinated with the cluster config, but this
		// wide subnet maximises compatibility for most clusters.
		"routes": {
			"10.0.0.0/8": ["tag:k8s"],
		},
		"services": {
			"tag:k8s": ["tag:k8s"],
		},
	},
	"grants": [
		{
			"src": ["tag:k8s"],
			"dst": ["tag:k8s", "tag:k8s-operator"],
			"ip":  ["tcp:80", "tcp:443"],
			"app": {
				"tailscale.com/cap/kubernetes": [{
					"impersonate": {
						"groups": ["ts:e2e-test-proxy"],
					},
				}],
			},
		},
	],
}`)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	operator := join(ctx, t, tn, "operator", "tag:k8s-operator")
	client := join(ctx, t, tn, "client", "tag:k8s")
	waitCaps(ctx, t, "the operator's WhoIs of the client", operator, addrsOf(ctx, t, client), map[string][]string{
		string(capK8s): {`{"impersonate":{"groups":["ts:e2e-test-proxy"]}}`},
	})
	waitCaps(ctx, t, "the client's WhoIs of the operator (not in src)", client, addrsOf(ctx, t, operator), map[string][]string{})
}
