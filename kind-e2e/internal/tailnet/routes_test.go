package tailnet

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/log"
	tsapi "tailscale.com/client/tailscale/v2"
	"tailscale.com/ipn"
	"tailscale.com/ipn/ipnstate"
	"tailscale.com/net/tsaddr"
	"tailscale.com/tailcfg"
	"tailscale.com/tsnet"
)

// noApprovers is a policy without autoApprovers: nothing is approved
// unless an admin approves it.
const noApprovers = `{"acls": [{"action": "accept", "src": ["*"], "dst": ["*:*"]}]}`

func startWithPolicy(t *testing.T, policy string) *Tailnet {
	t.Helper()
	tn, err := Start(t.Context(), Config{
		StateFile: filepath.Join(t.TempDir(), "state.json"), Addr: "127.0.0.1:0",
		MagicDNSDomain: "test.ts.net", Logger: log.New(io.Discard), Policy: policy,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tn.Close)
	return tn
}

// advertise makes node advertise routes (`tailscale set --advertise-routes`).
func advertise(ctx context.Context, t *testing.T, node *tsnet.Server, routes ...netip.Prefix) {
	t.Helper()
	lc, err := node.LocalClient()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lc.EditPrefs(ctx, &ipn.MaskedPrefs{Prefs: ipn.Prefs{AdvertiseRoutes: routes}, AdvertiseRoutesSet: true}); err != nil {
		t.Fatal(err)
	}
}

func selfID(ctx context.Context, t *testing.T, node *tsnet.Server) string {
	t.Helper()
	return string(waitStatus(ctx, t, node, "self", func(st *ipnstate.Status) bool { return st.Self != nil && st.Self.ID != "" }).Self.ID)
}

// waitRoutes polls the API's routes of device id until ok accepts them.
func waitRoutes(ctx context.Context, t *testing.T, api *tsapi.Client, id, what string, ok func(*tsapi.DeviceRoutes) bool) *tsapi.DeviceRoutes {
	t.Helper()
	for {
		r, err := api.Devices().SubnetRoutes(ctx, id)
		if err == nil && ok(r) {
			return r
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s: %v (last: %+v, %v)", what, ctx.Err(), r, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// peerRoutes is what peer host routes in node's netmap.
func peerRoutes(st *ipnstate.Status, host string) []netip.Prefix {
	p := peerNamed(st, host)
	if p == nil || p.PrimaryRoutes == nil {
		return nil
	}
	return p.PrimaryRoutes.AsSlice()
}

// With the default policy every advertised route is approved at once: the
// API shows it enabled and peers route it through the node.
func TestRoutesApprovedAutomatically(t *testing.T) {
	tn := startForTest(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	router := join(ctx, t, tn, "router", "tag:k8s")
	client := join(ctx, t, tn, "client")
	route := netip.MustParsePrefix("198.18.7.0/24")
	advertise(ctx, t, router, route)
	waitRoutes(ctx, t, client0(t, tn), selfID(ctx, t, router), "route enabled", func(r *tsapi.DeviceRoutes) bool {
		return slices.Equal(r.Advertised, []string{route.String()}) && slices.Equal(r.Enabled, []string{route.String()})
	})
	waitStatus(ctx, t, client, "peer routes the subnet", func(st *ipnstate.Status) bool {
		return slices.Equal(peerRoutes(st, "router"), []netip.Prefix{route})
	})
}

// Without an auto-approver an advertised route stays unapproved (no peer
// routes it) until approved through POST /api/v2/device/{id}/routes; then
// peers route it, and approving nothing withdraws it.
func TestRoutesApprovedThroughTheAPI(t *testing.T) {
	tn := startWithPolicy(t, noApprovers)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	api := client0(t, tn)
	router := join(ctx, t, tn, "router", "tag:k8s")
	client := join(ctx, t, tn, "client")
	route := netip.MustParsePrefix("10.42.0.0/16")
	advertise(ctx, t, router, route)
	id := selfID(ctx, t, router)
	waitRoutes(ctx, t, api, id, "route advertised", func(r *tsapi.DeviceRoutes) bool {
		return slices.Equal(r.Advertised, []string{route.String()})
	})
	// Nothing approves it: the check keeps holding for two seconds.
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) {
		r, err := api.Devices().SubnetRoutes(ctx, id)
		if err != nil || len(r.Enabled) != 0 {
			t.Fatalf("routes of an unapproved router = %+v, %v; want none enabled", r, err)
		}
		if got := peerRoutes(waitStatus(ctx, t, client, "status", func(*ipnstate.Status) bool { return true }), "router"); len(got) != 0 {
			t.Fatalf("client routes %v through the router before approval", got)
		}
		select {
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}

	if err := api.Devices().SetSubnetRoutes(ctx, id, []string{route.String()}); err != nil {
		t.Fatal(err)
	}
	waitStatus(ctx, t, client, "peer routes the approved subnet", func(st *ipnstate.Status) bool {
		return slices.Equal(peerRoutes(st, "router"), []netip.Prefix{route})
	})
	r, err := api.Devices().SubnetRoutes(ctx, id)
	if err != nil || !slices.Equal(r.Enabled, []string{route.String()}) {
		t.Fatalf("routes after approval = %+v, %v", r, err)
	}

	if err := api.Devices().SetSubnetRoutes(ctx, id, []string{}); err != nil {
		t.Fatal(err)
	}
	waitStatus(ctx, t, client, "approval withdrawn", func(st *ipnstate.Status) bool {
		return len(peerRoutes(st, "router")) == 0
	})

	// A bad route is refused with the reason.
	err = api.Devices().SetSubnetRoutes(ctx, id, []string{"10.42.0.0/33"})
	if err == nil || !strings.Contains(err.Error(), `route "10.42.0.0/33" is not a CIDR prefix`) {
		t.Fatalf("bad route: %v", err)
	}
}

// An exit node is approved by autoApprovers.exitNode only: a routes entry
// covering 0.0.0.0/0 approves subnet routes, not the exit routes. Once
// approved, peers see the node as an exit node option.
func TestExitNodeApproval(t *testing.T) {
	tn := startWithPolicy(t, `{
		// Subnets of tag:k8s anywhere, exit nodes only for tag:exit.
		"autoApprovers": {"routes": {"0.0.0.0/0": ["tag:k8s"]}, "exitNode": ["tag:exit"]},
	}`)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	api := client0(t, tn)
	client := join(ctx, t, tn, "client")
	subnet := netip.MustParsePrefix("10.9.0.0/16")
	k8s := join(ctx, t, tn, "k8s", "tag:k8s")
	advertise(ctx, t, k8s, append(tsaddr.ExitRoutes(), subnet)...)
	exit := join(ctx, t, tn, "exit", "tag:exit")
	advertise(ctx, t, exit, tsaddr.ExitRoutes()...)

	waitRoutes(ctx, t, api, selfID(ctx, t, k8s), "only the subnet approved for tag:k8s", func(r *tsapi.DeviceRoutes) bool {
		return len(r.Advertised) == 3 && slices.Equal(r.Enabled, []string{subnet.String()})
	})
	waitRoutes(ctx, t, api, selfID(ctx, t, exit), "the exit routes approved for tag:exit", func(r *tsapi.DeviceRoutes) bool {
		return slices.Equal(r.Enabled, []string{"0.0.0.0/0", "::/0"})
	})
	st := waitStatus(ctx, t, client, "exit is an exit node option", func(st *ipnstate.Status) bool {
		p := peerNamed(st, "exit")
		return p != nil && p.ExitNodeOption
	})
	if p := peerNamed(st, "k8s"); p == nil || p.ExitNodeOption {
		t.Fatalf("k8s, whose exit routes are not approved, is an exit node option: %+v", p)
	}
}

// The policy is the tailnet's policy file: GET and POST
// /api/v2/tailnet/-/acl with the official client; a new policy's
// autoApprovers approve routes advertised before it; a bad policy is
// refused with the reason and changes nothing.
func TestPolicyThroughTheAPI(t *testing.T) {
	tn := startWithPolicy(t, noApprovers)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	api := client0(t, tn)
	router := join(ctx, t, tn, "router", "tag:k8s")
	route := netip.MustParsePrefix("10.42.0.0/16")
	advertise(ctx, t, router, route)
	id := selfID(ctx, t, router)
	waitRoutes(ctx, t, api, id, "advertised", func(r *tsapi.DeviceRoutes) bool { return len(r.Advertised) == 1 })

	raw, err := api.PolicyFile().Raw(ctx)
	if err != nil || raw.HuJSON != noApprovers {
		t.Fatalf("policy = %+v, %v; want the one given at start", raw, err)
	}
	err = api.PolicyFile().Set(ctx, `{"autoApprovers": {"routes": {"10.0.0.0/8": ["group:nope"]}}}`, "")
	if err == nil || !strings.Contains(err.Error(), `group "group:nope" is not defined in groups`) {
		t.Fatalf("bad policy: %v", err)
	}
	with := `{
		// Routes in 10/8 of tag:k8s are approved.
		"autoApprovers": {"routes": {"10.0.0.0/8": ["tag:k8s"]}},
	}`
	if err := api.PolicyFile().Set(ctx, with, ""); err != nil {
		t.Fatal(err)
	}
	waitRoutes(ctx, t, api, id, "approved by the new policy", func(r *tsapi.DeviceRoutes) bool {
		return slices.Equal(r.Enabled, []string{route.String()})
	})
	if raw, err := api.PolicyFile().Raw(ctx); err != nil || raw.HuJSON != with {
		t.Fatalf("policy after set = %+v, %v", raw, err)
	}
}

// The app connector's domains come the way Tailscale's control plane sends
// them: the tailscale.com/app-connectors node attribute, from the policy's
// nodeAttrs, to the nodes its target names.
func TestAppConnectorAttributeFromNodeAttrs(t *testing.T) {
	const attr = `{"name": "internal", "connectors": ["tag:appc"], "domains": ["app.example.test"], "routes": ["192.0.2.0/24"]}`
	tn := startWithPolicy(t, `{"nodeAttrs": [{"target": ["tag:appc"], "app": {"tailscale.com/app-connectors": [`+attr+`]}}]}`)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	appc := join(ctx, t, tn, "appc", "tag:appc")
	other := join(ctx, t, tn, "other", "tag:k8s")
	st := waitStatus(ctx, t, appc, "the app-connectors attribute", func(st *ipnstate.Status) bool {
		return st.Self != nil && len(st.Self.CapMap["tailscale.com/app-connectors"]) == 1
	})
	var got, want map[string]any
	_ = json.Unmarshal([]byte(st.Self.CapMap["tailscale.com/app-connectors"][0]), &got)
	_ = json.Unmarshal([]byte(attr), &want)
	if !jsonEqual(got, want) {
		t.Fatalf("app-connectors attribute = %s, want %s", st.Self.CapMap["tailscale.com/app-connectors"][0], attr)
	}
	ost := waitStatus(ctx, t, other, "status", func(st *ipnstate.Status) bool { return st.Self != nil })
	if _, ok := ost.Self.CapMap[tailcfg.NodeCapability("tailscale.com/app-connectors")]; ok {
		t.Fatalf("a node the target does not name got the attribute: %v", ost.Self.CapMap)
	}
}

func jsonEqual(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

// client0 is an API client with the tailnet's OAuth client.
func client0(t *testing.T, tn *Tailnet) *tsapi.Client { return client(t, tn, tn.ClientSecret) }

// A policy that is not valid is refused at start with the reason.
func TestBadPolicyIsRefused(t *testing.T) {
	for _, tc := range []struct{ policy, want string }{
		{`{"autoApprovers": {"routes": {"10.0.0.0/33": ["tag:k8s"]}}}`, `"10.0.0.0/33" is not a CIDR prefix`},
		{`{"autoApprovers": {"exitNode": ["k8s"]}}`, `autoApprovers.exitNode: "k8s" is not a tag, group, user`},
		{`{"nodeAttrs": [{"target": ["tag:a"]}]}`, `nodeAttrs[0]: neither attr nor app is set`},
		{`{"acls": [}`, `not valid HuJSON`},
		{`{"autoApprovers": {"services": {"web": ["tag:k8s"]}}}`, `autoApprovers.services: "web" is not a valid service name: must start with 'svc:' (keys are svc:name, tag:x or *)`},
		{`{"autoApprovers": {"services": {"svc:web": ["k8s"]}}}`, `autoApprovers.services[svc:web]: "k8s" is not a tag, group, user`},
	} {
		_, err := Start(t.Context(), Config{StateFile: filepath.Join(t.TempDir(), "s.json"), Addr: "127.0.0.1:0",
			MagicDNSDomain: "test.ts.net", Logger: log.New(io.Discard), Policy: tc.policy})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("policy %s: err %v, want %q", tc.policy, err, tc.want)
		}
	}
	// And through the API, with the official error shape.
	tn := startForTest(t)
	req, _ := http.NewRequest(http.MethodPost, tn.URL+"/api/v2/tailnet/-/acl", strings.NewReader(`{"groups": {"admins": []}}`))
	tok, _ := tn.store.issueToken(tn.ClientID, tn.ClientSecret)
	req.Header.Set("Authorization", "Bearer "+tok)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusBadRequest || !strings.Contains(string(b), `"message":"policy: groups: \"admins\" does not start with group:"`) {
		t.Fatalf("POST acl = %d %s", res.StatusCode, b)
	}
}

// A restarted tailnet keeps its policy and the approvals: the router's
// approved route is served again to control without a new approval.
func TestRestartKeepsPolicyAndApprovals(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	state := filepath.Join(t.TempDir(), "state.json")
	first, err := Start(ctx, Config{StateFile: state, Addr: "127.0.0.1:0", MagicDNSDomain: "test.ts.net",
		Logger: log.New(io.Discard), Policy: noApprovers})
	if err != nil {
		t.Fatal(err)
	}
	router := join(ctx, t, first, "router", "tag:k8s")
	route := netip.MustParsePrefix("10.42.0.0/16")
	advertise(ctx, t, router, route)
	id := selfID(ctx, t, router)
	api := client0(t, first)
	waitRoutes(ctx, t, api, id, "advertised", func(r *tsapi.DeviceRoutes) bool { return len(r.Advertised) == 1 })
	if err := api.Devices().SetSubnetRoutes(ctx, id, []string{route.String()}); err != nil {
		t.Fatal(err)
	}
	first.Close()

	second := startAt(t, state, strings.TrimPrefix(first.URL, "http://"))
	defer second.Close()
	api = client0(t, second)
	if raw, err := api.PolicyFile().Raw(ctx); err != nil || raw.HuJSON != noApprovers {
		t.Fatalf("policy after restart = %+v, %v", raw, err)
	}
	if r, err := api.Devices().SubnetRoutes(ctx, id); err != nil || !slices.Equal(r.Enabled, []string{route.String()}) {
		t.Fatalf("routes after restart = %+v, %v", r, err)
	}
	second.routeMu.Lock()
	defer second.routeMu.Unlock()
	for k, s := range second.routes.served {
		if second.Control.Node(k).Hostinfo.Hostname() == "router" && slices.Equal(s.routes, []netip.Prefix{route}) {
			return
		}
	}
	t.Fatalf("the restarted control server does not route %s through the router: %+v", route, second.routes.served)
}
