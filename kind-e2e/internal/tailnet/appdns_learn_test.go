package tailnet

import (
	"context"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/charmbracelet/log"
	"golang.org/x/net/dns/dnsmessage"
	"golang.org/x/sys/unix"
	tsapi "tailscale.com/client/tailscale/v2"
	"tailscale.com/ipn"
	"tailscale.com/ipn/ipnstate"

	"github.com/tailplane/tailplane/kind-e2e/internal/clusterdns"
)

// resolvConfEnv names the resolv.conf that the re-executed test binds over
// /etc/resolv.conf in its own mount namespace.
const resolvConfEnv = "TAILNET_TEST_RESOLV_CONF"

// TestAppConnectorLearnsRoutesFromDNS proves, with tsnet nodes only
// (userspace, unforked tailscale.com v1.102.5), how an app connector learns
// a route from a DNS answer: the client's MagicDNS resolver sends the app
// domain's query to the connector's peer API (/dns-query, ipnlocal's
// peerAPIHandler.handleDNSQuery); the connector's resolver
// (resolver.HandlePeerDNSQuery) forwards it, on Linux, to the first
// nameserver of /etc/resolv.conf (stubResolverForOS, a fixed path, not the
// tailnet's DNS config); the answer goes through
// LocalBackend.ObserveDNSResponse to appc.AppConnector.ObserveDNSResponse,
// which advertises each address of a configured domain as a /32 (AdvertiseRoute:
// the node's prefs.AdvertiseRoutes). Control then sees the route and the
// policy's autoApprovers approve it; before the query it is not advertised.
//
// /etc/resolv.conf is the machine's, which resolves nothing here, so the
// test re-executes itself in a mount namespace of its own with a resolv.conf
// naming a clusterdns server (the process node's cluster DNS) whose records
// file holds the name: exactly what a pod on the process node gets.
func TestAppConnectorLearnsRoutesFromDNS(t *testing.T) {
	resolvConf := os.Getenv(resolvConfEnv)
	if resolvConf == "" {
		if os.Geteuid() != 0 {
			t.Fatal("needs root (as the process node does): a mount namespace with its own /etc/resolv.conf")
		}
		dir := t.TempDir()
		// A loopback address of its own: port 53 of it is free whatever
		// else runs on this machine.
		ns := netip.AddrFrom4([4]byte{127, 53, byte(os.Getpid() >> 8), byte(os.Getpid())})
		resolvConf = filepath.Join(dir, "resolv.conf")
		if err := os.WriteFile(resolvConf, fmt.Appendf(nil, "nameserver %s\n", ns), 0o644); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(os.Args[0], "-test.run=^TestAppConnectorLearnsRoutesFromDNS$", "-test.v", "-test.count=1", "-test.timeout=3m")
		cmd.Env = append(os.Environ(), resolvConfEnv+"="+resolvConf)
		// Go makes the new namespace's mounts private before exec.
		cmd.SysProcAttr = &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS}
		out, err := cmd.CombinedOutput()
		t.Logf("in a mount namespace with %s as /etc/resolv.conf:\n%s", resolvConf, out)
		if err != nil {
			t.Fatal(err)
		}
		return
	}
	if err := unix.Mount(resolvConf, "/etc/resolv.conf", "", unix.MS_BIND, ""); err != nil {
		t.Fatalf("bind %s at /etc/resolv.conf: %v", resolvConf, err)
	}
	b, err := os.ReadFile("/etc/resolv.conf")
	if err != nil {
		t.Fatal(err)
	}
	var nameserver string
	if _, err := fmt.Sscanf(string(b), "nameserver %s", &nameserver); err != nil {
		t.Fatalf("resolv.conf %q: %v", b, err)
	}

	const domain = "app.example.test"
	target := netip.MustParseAddr("192.0.2.7")
	route := netip.PrefixFrom(target, 32)
	records := filepath.Join(t.TempDir(), "dns-records")
	if err := os.WriteFile(records, fmt.Appendf(nil, "%s www.%s\n", target, domain), 0o644); err != nil {
		t.Fatal(err)
	}
	dnsSrv, err := clusterdns.Start(t.Context(), clusterdns.Config{Addr: nameserver, RecordsFile: records, Upstream: "-", Logger: log.New(io.Discard)})
	if err != nil {
		t.Fatal(err)
	}
	defer dnsSrv.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	tn := startWithPolicy(t, `{
		"acls": [{"action": "accept", "src": ["*"], "dst": ["*:*"]}],
		"autoApprovers": {"routes": {"192.0.2.0/24": ["tag:appc"]}},
		"nodeAttrs": [{"target": ["*"], "app": {"tailscale.com/app-connectors": [
			{"name": "app", "connectors": ["tag:appc"], "domains": ["*.`+domain+`"]}]}}]}`)
	api := client(t, tn, tn.ClientSecret)
	appc := join(ctx, t, tn, "appc", "tag:appc")
	cl := join(ctx, t, tn, "client", "tag:k8s")
	lc, err := appc.LocalClient()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lc.EditPrefs(ctx, &ipn.MaskedPrefs{Prefs: ipn.Prefs{AppConnector: ipn.AppConnectorPrefs{Advertise: true}}, AppConnectorSet: true}); err != nil {
		t.Fatal(err)
	}
	id := selfID(ctx, t, appc)
	st := waitStatus(ctx, t, appc, "the connector's address", func(st *ipnstate.Status) bool { return len(st.TailscaleIPs) > 0 })
	peerAPI := fmt.Sprintf("http://%s:", st.TailscaleIPs[0])

	// Before any query: nothing learned.
	if r, err := api.Devices().SubnetRoutes(ctx, id); err != nil || slices.Contains(r.Advertised, route.String()) {
		t.Fatalf("routes before the query: %+v, %v", r, err)
	}

	clc, err := cl.LocalClient()
	if err != nil {
		t.Fatal(err)
	}
	name := "www." + domain
	for {
		res, resolvers, err := clc.QueryDNS(ctx, name, "A")
		if err != nil {
			t.Fatal(err)
		}
		if got := answerAddrs(t, res); len(resolvers) > 0 && len(resolvers[0].Addr) > len(peerAPI) &&
			resolvers[0].Addr[:len(peerAPI)] == peerAPI && slices.Contains(got, target) {
			break // answered by the connector with the record
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s not answered with %s through the connector's peer API", name, target)
		case <-time.After(200 * time.Millisecond):
		}
	}

	// The connector advertises what it saw, control approves it by the
	// policy, and the client's netmap routes it through the connector.
	// The connector learns from the answer in the background (tailscaled's
	// app connector queues the advertisement), so its prefs can trail it.
	for {
		prefs, err := lc.GetPrefs(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if slices.Contains(prefs.AdvertiseRoutes, route) {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("connector prefs AdvertiseRoutes %v, want %s", prefs.AdvertiseRoutes, route)
		case <-time.After(100 * time.Millisecond):
		}
	}
	waitRoutes(ctx, t, api, id, "the learned route advertised and auto-approved", func(r *tsapi.DeviceRoutes) bool {
		return slices.Contains(r.Advertised, route.String()) && slices.Contains(r.Enabled, route.String())
	})
	waitStatus(ctx, t, cl, "the client's netmap routes "+route.String()+" through appc", func(st *ipnstate.Status) bool {
		return slices.Contains(peerRoutes(st, "appc"), route)
	})
}

// answerAddrs are the A and AAAA records of a DNS answer.
func answerAddrs(t *testing.T, res []byte) []netip.Addr {
	t.Helper()
	var p dnsmessage.Parser
	if _, err := p.Start(res); err != nil {
		t.Fatalf("bad DNS answer: %v", err)
	}
	_ = p.SkipAllQuestions()
	var out []netip.Addr
	for {
		h, err := p.AnswerHeader()
		if err != nil {
			return out
		}
		switch h.Type {
		case dnsmessage.TypeA:
			r, err := p.AResource()
			if err != nil {
				return out
			}
			out = append(out, netip.AddrFrom4(r.A))
		default:
			_ = p.SkipAnswer()
		}
	}
}
