package tailnet

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/log"
	tsapi "tailscale.com/client/tailscale/v2"
	"tailscale.com/ipn/ipnstate"
	"tailscale.com/ipn/store/mem"
	"tailscale.com/tailcfg"
	"tailscale.com/tsnet"
)

// The four policy blocks of the seed (the k3s operator guide), verbatim in
// examples/seed/policy (the contract).
const (
	seedTagOwners        = "1-tag-owners.json"
	seedRouteApprovers   = "2-route-approvers.json"
	seedServiceApprovers = "3-service-approvers.json"
	seedGrants           = "4-grants.json"
)

// seedPolicy reads one of the seed's policy blocks.
func seedPolicy(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "..", "examples", "seed", "policy", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// startSeed starts a tailnet with policy, an OAuth client tagged
// clientTags, and alice@example.com in the directory's group:dev.
func startSeed(t *testing.T, policy string, clientTags ...string) *Tailnet {
	t.Helper()
	tn, err := Start(t.Context(), Config{
		StateFile: filepath.Join(t.TempDir(), "state.json"), Addr: "127.0.0.1:0",
		MagicDNSDomain: "test.ts.net", Logger: log.New(io.Discard), Policy: policy,
		ClientTags: clientTags, Groups: map[string][]string{"group:dev": {"alice@example.com"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tn.Close)
	return tn
}

// joinAs starts an ephemeral tsnet node of the user login.
func joinAs(ctx context.Context, t *testing.T, tn *Tailnet, hostname, login string) *tsnet.Server {
	t.Helper()
	k, err := tn.UserAuthKey(login)
	if err != nil {
		t.Fatal(err)
	}
	s := &tsnet.Server{ControlURL: tn.URL, Hostname: hostname, AuthKey: k, Ephemeral: true,
		Store: new(mem.Store), Dir: t.TempDir(), Logf: func(string, ...any) {}, UserLogf: func(string, ...any) {}}
	if _, err := s.Up(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// echo serves TCP port on node: each connection gets back what it sends.
func echo(t *testing.T, node *tsnet.Server, port int) {
	t.Helper()
	ln, err := node.Listen("tcp", fmt.Sprintf(":%d", port))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); _, _ = io.Copy(c, c) }()
		}
	}()
}

// reach dials dst:port from node and exchanges a line; a connection the
// destination's packet filter drops times out.
func reach(ctx context.Context, from *tsnet.Server, dst netip.Addr, port int) error {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	c, err := from.Dial(ctx, "tcp", net.JoinHostPort(dst.String(), fmt.Sprint(port)))
	if err != nil {
		return err
	}
	defer c.Close()
	if d, ok := ctx.Deadline(); ok {
		_ = c.SetDeadline(d)
	}
	if _, err := c.Write([]byte("ping\n")); err != nil {
		return err
	}
	buf := make([]byte, 5)
	if _, err := io.ReadFull(c, buf); err != nil {
		return err
	}
	if string(buf) != "ping\n" {
		return fmt.Errorf("echo answered %q", buf)
	}
	return nil
}

// waitReach polls until from reaches dst:port.
func waitReach(ctx context.Context, t *testing.T, what string, from *tsnet.Server, dst netip.Addr, port int) {
	t.Helper()
	for {
		err := reach(ctx, from, dst, port)
		if err == nil {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s: %v (last: %v)", what, ctx.Err(), err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// denied checks that from cannot reach dst:port.
func denied(ctx context.Context, t *testing.T, what string, from *tsnet.Server, dst netip.Addr, port int) {
	t.Helper()
	if err := reach(ctx, from, dst, port); err == nil {
		t.Fatalf("%s: connected, want the connection dropped", what)
	}
}

// The seed's grant lets group:dev reach tag:k8s on TCP 443 and nothing
// else: a group member connects, a user outside the group does not,
// nobody reaches 5432, until the policy, changed live, adds tcp:5432.
func TestSeedGrantFiltersPackets(t *testing.T) {
	tn := startSeed(t, seedPolicy(t, seedGrants), "tag:k8s-operator")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	proxy := join(ctx, t, tn, "proxy", "tag:k8s")
	alice := joinAs(ctx, t, tn, "alice", "alice@example.com")
	bob := joinAs(ctx, t, tn, "bob", "bob@example.com")
	echo(t, proxy, 443)
	echo(t, proxy, 5432)
	ip := addrsOf(ctx, t, proxy)[0]
	waitReach(ctx, t, "alice (group:dev) to the proxy on 443", alice, ip, 443)
	denied(ctx, t, "bob (not in group:dev) to the proxy on 443", bob, ip, 443)
	denied(ctx, t, "alice to the proxy on 5432", alice, ip, 5432)
	denied(ctx, t, "bob to the proxy on 5432", bob, ip, 5432)

	withDB := strings.Replace(seedPolicy(t, seedGrants), `"ip": ["tcp:443"]`, `"ip": ["tcp:443", "tcp:5432"]`, 1)
	if err := client0(t, tn).PolicyFile().Set(ctx, withDB, ""); err != nil {
		t.Fatal(err)
	}
	waitReach(ctx, t, "alice to the proxy on 5432 once the policy adds it", alice, ip, 5432)
	denied(ctx, t, "bob to the proxy on 5432 after the change", bob, ip, 5432)
	waitReach(ctx, t, "alice to the proxy on 443 after the change", alice, ip, 443)
}

// acls work as grants' ip do: users, hosts, CIDRs and ports; a policy
// without acls or grants' ip leaves the tailnet open.
func TestACLsFilterPackets(t *testing.T) {
	tn := startSeed(t, `{
		"hosts": {"db": "100.64.0.1"},
		"acls": [
			{"action": "accept", "src": ["bob@example.com"], "dst": ["db:5432", "tag:k8s:80,8000-8100"]},
			{"action": "accept", "src": ["group:dev"], "dst": ["100.64.0.0/24:443"], "proto": "tcp"},
		],
	}`)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	db := join(ctx, t, tn, "db", "tag:k8s") // the first node: 100.64.0.1
	alice := joinAs(ctx, t, tn, "alice", "alice@example.com")
	bob := joinAs(ctx, t, tn, "bob", "bob@example.com")
	for _, p := range []int{443, 5432, 8080, 9000} {
		echo(t, db, p)
	}
	ip := addrsOf(ctx, t, db)[0]
	if ip != netip.MustParseAddr("100.64.0.1") {
		t.Fatalf("db has %v, the hosts entry names 100.64.0.1", ip)
	}
	waitReach(ctx, t, "bob to db:5432 (hosts)", bob, ip, 5432)
	waitReach(ctx, t, "bob to tag:k8s:8080 (range)", bob, ip, 8080)
	waitReach(ctx, t, "alice to 100.64.0.0/24:443", alice, ip, 443)
	denied(ctx, t, "bob to 9000", bob, ip, 9000)
	denied(ctx, t, "alice to 5432", alice, ip, 5432)

	// devcluster's reach endpoint gives the same answers, with a reason
	// (devcluster curl asks it before dialling).
	for _, c := range []struct {
		from *tsnet.Server
		port uint16
		want bool
	}{{bob, 5432, true}, {bob, 9000, false}, {alice, 443, true}, {alice, 5432, false}} {
		src := addrsOf(ctx, t, c.from)[0]
		res, found, err := AskReach(ctx, tn.URL, tn.ClientID, tn.ClientSecret, src, ip, c.port)
		if err != nil || !found || res.Allowed != c.want || res.Reason == "" {
			t.Errorf("reach %s -> %s:%d = %+v found=%v err=%v, want allowed=%v with a reason", src, ip, c.port, res, found, err, c.want)
		}
		if !c.want && !strings.Contains(res.Reason, "no rule of the tailnet policy") {
			t.Errorf("reach %s -> %s:%d: reason %q does not say the policy drops it", src, ip, c.port, res.Reason)
		}
	}
	if _, found, err := AskReach(ctx, tn.URL, tn.ClientID, tn.ClientSecret, ip, netip.MustParseAddr("100.64.9.9"), 80); err != nil || found {
		t.Errorf("reach to an address no device has: found=%v err=%v, want not found", found, err)
	}

	if err := client0(t, tn).PolicyFile().Set(ctx, `{"autoApprovers": {"exitNode": ["tag:k8s"]}}`, ""); err != nil {
		t.Fatal(err)
	}
	waitReach(ctx, t, "alice to 9000 under a policy with neither acls nor grants", alice, ip, 9000)
}

// The seed's policy blocks load verbatim, and tagOwners decide which tags
// the OAuth client may put on auth keys: its own tag and the tags it owns
// pass; a client whose tags own nothing gets the official 400.
func TestSeedTagOwnersAndOAuthClientTags(t *testing.T) {
	for _, p := range []string{seedTagOwners, seedRouteApprovers, seedServiceApprovers, seedGrants} {
		startSeed(t, seedPolicy(t, p), "tag:k8s-operator")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	mint := func(tn *Tailnet, tags ...string) error {
		var req tsapi.CreateKeyRequest
		req.Capabilities.Devices.Create.Tags = tags
		_, err := client0(t, tn).Keys().CreateAuthKey(ctx, req)
		return err
	}
	operator := startSeed(t, seedPolicy(t, seedTagOwners), "tag:k8s-operator")
	for _, tags := range [][]string{{"tag:k8s"}, {"tag:k8s-operator"}, {"tag:k8s", "tag:k8s-operator"}} {
		if err := mint(operator, tags...); err != nil {
			t.Errorf("tag:k8s-operator client, tags %v: %v", tags, err)
		}
	}
	other := startSeed(t, seedPolicy(t, seedTagOwners), "tag:ci")
	for _, c := range []struct {
		tn   *Tailnet
		tags []string
	}{{other, []string{"tag:k8s"}}, {operator, []string{"tag:undefined"}}, {operator, []string{"tag:k8s", "tag:nope"}}} {
		err := mint(c.tn, c.tags...)
		var api tsapi.APIError
		want := fmt.Sprintf("requested tags %v are invalid or not permitted", c.tags)
		if !errors.As(err, &api) || api.Status != 400 || api.Message != want {
			t.Errorf("client %v, tags %v: %v, want 400 %q", c.tn.ClientTags, c.tags, err, want)
		}
	}
	if _, err := other.UserAuthKey("admin@example.com", "tag:k8s"); err == nil {
		t.Error("a user who owns no tag minted a tag:k8s key")
	}
	if _, err := other.UserAuthKey(other.defaultLogin(), "tag:k8s-operator"); err != nil {
		t.Errorf("the tailnet's owner (autogroup:admin): %v", err)
	}
}

// The funnel node attribute reaches exactly the nodes nodeAttrs gives it
// to, live: without an entry no node has it, and adding one gives it to
// tag:k8s only.
func TestFunnelAttribute(t *testing.T) {
	tn := startSeed(t, seedPolicy(t, seedTagOwners))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	proxy := join(ctx, t, tn, "proxy", "tag:k8s")
	user := join(ctx, t, tn, "user")
	hasFunnel := func(st *ipnstate.Status) bool { return st.Self != nil && st.Self.HasCap(tailcfg.NodeAttrFunnel) }
	if st := waitStatus(ctx, t, proxy, "proxy running", func(st *ipnstate.Status) bool { return st.BackendState == "Running" }); hasFunnel(st) {
		t.Fatalf("the proxy has the funnel attribute with no nodeAttrs entry: %v", st.Self.CapMap)
	}
	withFunnel := strings.Replace(seedPolicy(t, seedTagOwners), `"tagOwners"`, `"nodeAttrs": [{"target": ["tag:k8s"], "attr": ["funnel"]}], "tagOwners"`, 1)
	if err := client0(t, tn).PolicyFile().Set(ctx, withFunnel, ""); err != nil {
		t.Fatal(err)
	}
	waitStatus(ctx, t, proxy, "funnel on the tag:k8s proxy", hasFunnel)
	if st := waitStatus(ctx, t, user, "user running", func(st *ipnstate.Status) bool { return st.BackendState == "Running" }); hasFunnel(st) {
		t.Fatal("an untagged device has the funnel attribute")
	}
}
