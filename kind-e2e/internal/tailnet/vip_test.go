package tailnet

import (
	"context"
	"errors"
	"io"
	"net"
	"net/netip"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/charmbracelet/log"
	tsapi "tailscale.com/client/tailscale/v2"
	"tailscale.com/ipn/ipnstate"
	"tailscale.com/tailcfg"
	"tailscale.com/tsnet"
)

// hostService makes node host svc on TCP port: every connection gets
// reply, then EOF.
func hostService(t *testing.T, node *tsnet.Server, svc string, port uint16, reply string) *tsnet.ServiceListener {
	t.Helper()
	ln, err := node.ListenService(svc, tsnet.ServiceModeTCP{Port: port})
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_, _ = io.WriteString(c, reply)
			_ = c.Close()
		}
	}()
	t.Cleanup(func() { _ = ln.Close() })
	return ln
}

// ask dials addr from node and returns what it answers, within a second
// (or ctx's deadline if sooner).
func ask(ctx context.Context, node *tsnet.Server, addr string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	c, err := node.Dial(ctx, "tcp", addr)
	if err != nil {
		return "", err
	}
	defer c.Close()
	deadline, _ := ctx.Deadline()
	_ = c.SetDeadline(deadline)
	b, err := io.ReadAll(c)
	return string(b), err
}

// waitAnswer polls addr from node until it answers want.
func waitAnswer(ctx context.Context, t *testing.T, node *tsnet.Server, addr, want string) {
	t.Helper()
	for {
		got, err := ask(ctx, node, addr)
		if err == nil && got == want {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s never answered %q (last: %q, %v)", addr, want, got, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// serviceHost is the service-host capability in a node's own status.
func serviceHost(st *ipnstate.Status) tailcfg.ServiceIPMappings {
	if st.Self == nil {
		return nil
	}
	m, err := tailcfg.UnmarshalNodeCapJSON[tailcfg.ServiceIPMappings](st.Self.CapMap, tailcfg.NodeAttrServiceHost)
	if err != nil || len(m) != 1 {
		return nil
	}
	return m[0]
}

// peerAllowed reports whether peer host has all of addrs in its AllowedIPs
// in st.
func peerAllowed(st *ipnstate.Status, host string, addrs ...netip.Addr) bool {
	p := peerNamed(st, host)
	if p == nil || p.AllowedIPs == nil {
		return false
	}
	for _, a := range addrs {
		if !slices.Contains(p.AllowedIPs.AsSlice(), netip.PrefixFrom(a, a.BitLen())) {
			return false
		}
	}
	return true
}

// carriers are the peers that have addr in their AllowedIPs in st.
func carriers(st *ipnstate.Status, addr netip.Addr) []string {
	var out []string
	for _, p := range st.Peer {
		if p.AllowedIPs != nil && slices.Contains(p.AllowedIPs.AsSlice(), netip.PrefixFrom(addr, addr.BitLen())) {
			out = append(out, p.HostName)
		}
	}
	return out
}

// waitCarried waits until exactly host carries the service's addresses
// in node's netmap.
func waitCarried(ctx context.Context, t *testing.T, node *tsnet.Server, host string, v4, v6 netip.Addr) {
	t.Helper()
	waitStatus(ctx, t, node, "only "+host+" carries the service", func(st *ipnstate.Status) bool {
		return slices.Equal(carriers(st, v4), []string{host}) && slices.Equal(carriers(st, v6), []string{host})
	})
}

func createService(ctx context.Context, t *testing.T, tn *Tailnet, svc tsapi.Service) (v4, v6 netip.Addr) {
	t.Helper()
	api := client0(t, tn).VIPServices()
	if err := api.CreateOrUpdate(ctx, svc); err != nil {
		t.Fatal(err)
	}
	got, err := api.Get(ctx, svc.Name)
	if err != nil {
		t.Fatal(err)
	}
	return serviceAddrs(t, got)
}

// A tagged node that listens on a Tailscale Service (tsnet.ListenService:
// AdvertiseServices and a serve config) becomes its host: control learns
// that through c2n GET /vip-services, gives the node the service-host
// capability with the service's addresses and the service's name as a
// certificate name, routes the addresses to it in every peer's netmap,
// and every node resolves the service's MagicDNS name. Deleting the
// service through the API takes all of it back.
func TestServiceHostedAndRouted(t *testing.T) {
	tn := startForTest(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	v4, v6 := createService(ctx, t, tn, tsapi.Service{Name: "svc:web", Ports: []string{"tcp:80"}, Tags: []string{"tag:k8s"}})
	host := join(ctx, t, tn, "host", "tag:k8s")
	client := join(ctx, t, tn, "client")
	other := join(ctx, t, tn, "other", "tag:other")
	hostService(t, host, "svc:web", 80, "hello from host")

	st := waitStatus(ctx, t, host, "the host has the service-host capability", func(st *ipnstate.Status) bool {
		return slices.Equal(serviceHost(st)["svc:web"], []netip.Addr{v4, v6})
	})
	if !slices.Contains(st.CertDomains, "web.test.ts.net") {
		t.Fatalf("the host's certificate names %v lack web.test.ts.net", st.CertDomains)
	}
	for _, a := range st.TailscaleIPs {
		if VIPRange().Contains(a) {
			t.Fatalf("a node got %v, inside the services' range %v", a, VIPRange())
		}
	}
	waitStatus(ctx, t, client, "the client routes the service's addresses to the host", func(st *ipnstate.Status) bool {
		return peerAllowed(st, "host", v4, v6)
	})
	// By name (MagicDNS) and by address, from a user's device and from
	// another tagged node.
	waitAnswer(ctx, t, client, "web.test.ts.net:80", "hello from host")
	waitAnswer(ctx, t, client, net.JoinHostPort(v4.String(), "80"), "hello from host")
	waitAnswer(ctx, t, client, net.JoinHostPort(v6.String(), "80"), "hello from host")
	waitAnswer(ctx, t, other, "web.test.ts.net:80", "hello from host")
	ost := waitStatus(ctx, t, other, "status", func(*ipnstate.Status) bool { return true })
	if serviceHost(ost) != nil || slices.Contains(ost.CertDomains, "web.test.ts.net") {
		t.Fatalf("a node that does not serve the service got its capability or name: %v %v", ost.Self.CapMap, ost.CertDomains)
	}

	if err := client0(t, tn).VIPServices().Delete(ctx, "svc:web"); err != nil {
		t.Fatal(err)
	}
	waitStatus(ctx, t, host, "the capability and name are gone", func(st *ipnstate.Status) bool {
		return serviceHost(st) == nil && !slices.Contains(st.CertDomains, "web.test.ts.net")
	})
	waitStatus(ctx, t, client, "the route is gone", func(st *ipnstate.Status) bool {
		p := peerNamed(st, "host")
		return p != nil && !peerAllowed(st, "host", v4) && !peerAllowed(st, "host", v6)
	})
	for {
		_, err := ask(ctx, client, "web.test.ts.net:80")
		var dnsErr *net.DNSError
		if errors.As(err, &dnsErr) {
			break // the name no longer resolves
		}
		select {
		case <-ctx.Done():
			t.Fatalf("web.test.ts.net still resolves after the service was deleted: %v", err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// primaryOf is the node the service is routed to, as control decided.
func primaryOf(tn *Tailnet, svc string) string {
	tn.routeMu.Lock()
	k, ok := tn.routes.vip.primary[svc]
	tn.routeMu.Unlock()
	if n := tn.Control.Node(k); ok && n != nil {
		return n.Hostinfo.Hostname()
	}
	return ""
}

// waitReported waits until control knows (c2n GET /vip-services) that the
// node named host serves svc, active or not as given.
func waitReported(ctx context.Context, t *testing.T, tn *Tailnet, host, svc string, active bool) {
	t.Helper()
	for {
		tn.routeMu.Lock()
		found := false
		for k, r := range tn.routes.vip.reported {
			if n := tn.Control.Node(k); n != nil && n.Hostinfo.Hostname() == host {
				vs := r.find(svc)
				found = vs != nil && vs.Active == active
			}
		}
		tn.routeMu.Unlock()
		if found {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("control never learned that %s serves %s (active %v)", host, svc, active)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Two hosts serve a service; its addresses go to the one with the lowest
// node ID. When that host's process stops (its map poll closes), control
// routes the service to the other within seconds: a client dialing the
// service all along reaches the second host. The gap is logged.
func TestServiceFailoverWhenHostStops(t *testing.T) {
	tn := startForTest(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	a := join(ctx, t, tn, "host-a", "tag:k8s")
	b := join(ctx, t, tn, "host-b", "tag:k8s")
	client := join(ctx, t, tn, "client")
	// Both serve it before it exists, so the lowest node ID decides.
	hostService(t, b, "svc:web", 80, "b")
	hostService(t, a, "svc:web", 80, "a")
	waitReported(ctx, t, tn, "host-a", "svc:web", true)
	waitReported(ctx, t, tn, "host-b", "svc:web", true)
	v4, v6 := createService(ctx, t, tn, tsapi.Service{Name: "svc:web", Ports: []string{"tcp:80"}})
	for _, h := range []*tsnet.Server{a, b} {
		waitStatus(ctx, t, h, "both hosts are approved", func(st *ipnstate.Status) bool { return serviceHost(st)["svc:web"] != nil })
	}
	waitAnswer(ctx, t, client, "web.test.ts.net:80", "a")
	if p := primaryOf(tn, "svc:web"); p != "host-a" {
		t.Fatalf("svc:web is routed to %q, want host-a (the lowest node ID)", p)
	}
	waitCarried(ctx, t, client, "host-a", v4, v6)

	// The client dials the service every 20 ms (each try given 250 ms)
	// while host-a stops.
	addr := net.JoinHostPort(v4.String(), "80")
	lastA, stopped := time.Now(), make(chan time.Time, 1)
	go func() {
		t0 := time.Now()
		_ = a.Close()
		stopped <- t0
	}()
	var stop time.Time
	failures := 0
	for {
		try, done := context.WithTimeout(ctx, 250*time.Millisecond)
		got, err := ask(try, client, addr)
		done()
		now := time.Now()
		switch {
		case got == "a":
			lastA = now
		case got == "b":
			if stop.IsZero() {
				stop = <-stopped
			}
			t.Logf("failover: %v from stopping host-a to the first answer from host-b, %v since host-a's last answer; %d failed tries", now.Sub(stop).Round(time.Millisecond), now.Sub(lastA).Round(time.Millisecond), failures)
			if now.Sub(stop) > 5*time.Second {
				t.Fatalf("failover took %v, want under 5 s", now.Sub(stop))
			}
			if p := primaryOf(tn, "svc:web"); p != "host-b" {
				t.Fatalf("svc:web is routed to %q, want host-b", p)
			}
			waitCarried(ctx, t, client, "host-b", v4, v6)
			return
		case err != nil:
			failures++
		}
		select {
		case stop = <-stopped:
		default:
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the client never reached host-b: last %q, %v", got, err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// testLogger discards the tailnet's log unless TAILNET_TEST_LOG is set.
func testLogger() *log.Logger {
	if os.Getenv("TAILNET_TEST_LOG") == "" {
		return log.New(io.Discard)
	}
	l := log.New(os.Stderr)
	l.SetLevel(log.DebugLevel)
	l.SetReportTimestamp(true)
	l.SetTimeFormat("15:04:05.000")
	return l
}

// A host that stops advertising the service (its listener closes) loses
// the route to the other host; one that advertises again does not take it
// back (the chosen host stays while it qualifies); a host deleted through
// the API loses it too.
func TestServiceMovesWhenHostWithdrawsOrIsDeleted(t *testing.T) {
	tn := startForTest(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	a := join(ctx, t, tn, "host-a", "tag:k8s")
	b := join(ctx, t, tn, "host-b", "tag:k8s")
	client := join(ctx, t, tn, "client")
	lnA := hostService(t, a, "svc:web", 80, "a")
	hostService(t, b, "svc:web", 80, "b")
	waitReported(ctx, t, tn, "host-a", "svc:web", true)
	waitReported(ctx, t, tn, "host-b", "svc:web", true)
	v4, v6 := createService(ctx, t, tn, tsapi.Service{Name: "svc:web", Ports: []string{"tcp:80"}})
	waitAnswer(ctx, t, client, "web.test.ts.net:80", "a")
	waitCarried(ctx, t, client, "host-a", v4, v6)

	if err := lnA.Close(); err != nil {
		t.Fatal(err)
	}
	waitAnswer(ctx, t, client, "web.test.ts.net:80", "b")
	waitCarried(ctx, t, client, "host-b", v4, v6)

	hostService(t, a, "svc:web", 80, "a again")
	waitReported(ctx, t, tn, "host-a", "svc:web", true)
	for range 5 {
		if got, err := ask(ctx, client, "web.test.ts.net:80"); got != "b" || primaryOf(tn, "svc:web") != "host-b" {
			t.Fatalf("after host-a advertised again the service answered %q (%v), routed to %q; want host-b to keep it", got, err, primaryOf(tn, "svc:web"))
		}
	}

	api := client0(t, tn)
	if err := api.Devices().Delete(ctx, selfID(ctx, t, b)); err != nil {
		t.Fatal(err)
	}
	waitAnswer(ctx, t, client, "web.test.ts.net:80", "a again")
	waitCarried(ctx, t, client, "host-a", v4, v6)
}

// Only devices the policy's autoApprovers.services name host a service:
// by the service's name or by one of its tags. A policy set through the
// API approves hosts that advertised before it.
func TestServiceApprovalFollowsPolicy(t *testing.T) {
	tn := startWithPolicy(t, `{
		"autoApprovers": {"services": {
			"svc:web":    ["tag:web"],    // by name
			"tag:public": ["tag:k8s"],    // every service tagged tag:public
		}},
		"nodeAttrs": [{"target": ["tag:k8s"], "attr": ["example.com/kept"]}],
	}`)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	webV4, _ := createService(ctx, t, tn, tsapi.Service{Name: "svc:web", Ports: []string{"tcp:80"}})
	apiV4, _ := createService(ctx, t, tn, tsapi.Service{Name: "svc:api", Ports: []string{"tcp:80"}, Tags: []string{"tag:public"}})
	k8s := join(ctx, t, tn, "k8s-host", "tag:k8s")
	web := join(ctx, t, tn, "web-host", "tag:web")
	client := join(ctx, t, tn, "client")
	hostService(t, k8s, "svc:web", 80, "web from k8s")
	hostService(t, k8s, "svc:api", 80, "api from k8s")
	hostService(t, web, "svc:web", 80, "web from web")
	hostService(t, web, "svc:api", 80, "api from web")
	waitReported(ctx, t, tn, "k8s-host", "svc:api", true)
	waitReported(ctx, t, tn, "web-host", "svc:api", true)

	kst := waitStatus(ctx, t, k8s, "k8s hosts svc:api", func(st *ipnstate.Status) bool { return serviceHost(st)["svc:api"] != nil })
	wst := waitStatus(ctx, t, web, "web hosts svc:web", func(st *ipnstate.Status) bool { return serviceHost(st)["svc:web"] != nil })
	if _, ok := kst.Self.CapMap["example.com/kept"]; !ok {
		t.Fatalf("the service-host capability replaced the policy's nodeAttrs: %v", kst.Self.CapMap)
	}
	if serviceHost(kst)["svc:web"] != nil || serviceHost(wst)["svc:api"] != nil {
		t.Fatalf("a device the policy does not name hosts a service: k8s %v, web %v", serviceHost(kst), serviceHost(wst))
	}
	waitAnswer(ctx, t, client, "web.test.ts.net:80", "web from web")
	waitAnswer(ctx, t, client, "api.test.ts.net:80", "api from k8s")
	cst := waitStatus(ctx, t, client, "status", func(*ipnstate.Status) bool { return true })
	if peerAllowed(cst, "k8s-host", webV4) || peerAllowed(cst, "web-host", apiV4) {
		t.Fatal("a service is routed to a device the policy does not name")
	}

	// A new policy lets tag:k8s host svc:web too.
	if err := client0(t, tn).PolicyFile().Set(ctx, `{"autoApprovers": {"services": {"svc:web": ["tag:web", "tag:k8s"]}}}`, ""); err != nil {
		t.Fatal(err)
	}
	waitStatus(ctx, t, k8s, "k8s hosts svc:web under the new policy", func(st *ipnstate.Status) bool {
		return serviceHost(st)["svc:web"] != nil && serviceHost(st)["svc:api"] == nil
	})
}
