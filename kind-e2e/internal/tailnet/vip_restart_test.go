package tailnet

import (
	"context"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"testing"
	"time"

	tsapi "tailscale.com/client/tailscale/v2"
	"tailscale.com/ipn"
	"tailscale.com/ipn/store/mem"
	"tailscale.com/tailcfg"
	"tailscale.com/tsnet"
	"tailscale.com/types/ipproto"
	"tailscale.com/types/key"
)

// replica is a service host whose state outlives its process, like a
// ProxyGroup replica whose state lives in a Kubernetes Secret: every
// start is a new tsnet.Server on the same store, so the same node (same
// node key) comes back.
type replica struct {
	t       *testing.T
	tn      *Tailnet
	name    string
	authKey string
	store   keptStore
	dir     string
	key     key.NodePublic
	ip      netip.Addr
	srv     *tsnet.Server
}

// keptStore is a state store kept across a replica's restarts, like its
// state Secret (tsnet refuses a bare mem.Store for a node that is not
// ephemeral).
type keptStore struct{ *mem.Store }

func newReplica(ctx context.Context, t *testing.T, tn *Tailnet, name string) *replica {
	t.Helper()
	var req tsapi.CreateKeyRequest
	req.Capabilities.Devices.Create.Preauthorized = true
	req.Capabilities.Devices.Create.Tags = []string{"tag:k8s"}
	k, err := client0(t, tn).Keys().CreateAuthKey(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	return &replica{t: t, tn: tn, name: name, authKey: k.Key, store: keptStore{new(mem.Store)}, dir: t.TempDir()}
}

// start runs a new process of the replica: it serves svc:web on port 80
// (answering reply), then on extraPorts one at a time, each once control
// has the node's previous ServicesHash (so control asks the node about
// every step, and answers about earlier steps are still on their way when
// later ones are asked); and it answers "alive" on its own address, port
// 81. The extra ports make every start's final hash one the node never
// had before.
func (r *replica) start(ctx context.Context, reply string, extraPorts ...uint16) {
	r.t.Helper()
	r.srv = &tsnet.Server{ControlURL: r.tn.URL, Hostname: r.name, AuthKey: r.authKey, Store: r.store, Dir: r.dir,
		Logf: func(string, ...any) {}, UserLogf: func(string, ...any) {}}
	srv := r.srv
	r.t.Cleanup(func() { _ = srv.Close() })
	st, err := srv.Up(ctx)
	if err != nil {
		r.t.Fatal(err)
	}
	if !r.key.IsZero() && st.Self.PublicKey != r.key {
		r.t.Fatalf("%s came back as a new node", r.name)
	}
	r.key, r.ip = st.Self.PublicKey, st.TailscaleIPs[0]
	hostService(r.t, srv, "svc:web", 80, reply)
	for _, p := range extraPorts {
		prev := r.servicesHash()
		hostService(r.t, srv, "svc:web", p, reply)
		for r.servicesHash() == prev {
			select {
			case <-ctx.Done():
				r.t.Fatalf("%s never sent control its services with port %d", r.name, p)
			case <-time.After(5 * time.Millisecond):
			}
		}
	}
	ln, err := srv.Listen("tcp", ":81")
	if err != nil {
		r.t.Fatal(err)
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_, _ = io.WriteString(c, "alive")
			_ = c.Close()
		}
	}()
}

// withdraw stops advertising the service as a proxy does on SIGTERM:
// prefs first, then the serve config.
func (r *replica) withdraw(ctx context.Context) {
	r.t.Helper()
	lc, err := r.srv.LocalClient()
	if err != nil {
		r.t.Fatal(err)
	}
	if _, err := lc.EditPrefs(ctx, &ipn.MaskedPrefs{AdvertiseServicesSet: true, Prefs: ipn.Prefs{AdvertiseServices: []string{}}}); err != nil {
		r.t.Fatal(err)
	}
	if err := lc.SetServeConfig(ctx, &ipn.ServeConfig{}); err != nil {
		r.t.Fatal(err)
	}
}

// kill ends the replica's process without withdrawing anything (its
// listeners go with it).
func (r *replica) kill() {
	r.t.Helper()
	if err := r.srv.Close(); err != nil {
		r.t.Fatal(err)
	}
}

// servicesHash is the ServicesHash control holds for the replica's node.
func (r *replica) servicesHash() string {
	n := r.tn.Control.Node(r.key)
	if n == nil || !n.Hostinfo.Valid() {
		return ""
	}
	return n.Hostinfo.ServicesHash()
}

// learned reports whether control knows (c2n GET /vip-services) that
// replica r serves svc:web on port.
func learned(tn *Tailnet, r *replica, port uint16) bool {
	tn.routeMu.Lock()
	defer tn.routeMu.Unlock()
	vs := tn.routes.vip.reported[r.key].find("svc:web")
	return vs != nil && vs.Active && slices.ContainsFunc(vs.Ports, func(p tailcfg.ProtoPortRange) bool {
		return (p.Proto == 0 || p.Proto == int(ipproto.TCP)) && p.Ports.Contains(port)
	})
}

// waitLearned waits (up to 30 s) until control knows that replica r
// serves svc:web on port, and returns how long that took; then it checks
// that control keeps knowing it while every answer to earlier questions
// lands (jitterC2N delays them up to 300 ms).
func waitLearned(ctx context.Context, t *testing.T, tn *Tailnet, r *replica, port uint16) time.Duration {
	t.Helper()
	t0 := time.Now()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for !learned(tn, r, port) {
		select {
		case <-ctx.Done():
			t.Fatalf("control did not learn within %v that %s serves svc:web on port %d", time.Since(t0).Round(time.Second), r.name, port)
		case <-time.After(10 * time.Millisecond):
		}
	}
	took := time.Since(t0)
	for settled := time.Now().Add(400 * time.Millisecond); time.Now().Before(settled); {
		if !learned(tn, r, port) {
			t.Fatalf("control forgot that %s serves svc:web on port %d: a late answer about an earlier state replaced the current one", r.name, port)
		}
		select {
		case <-ctx.Done():
		case <-time.After(10 * time.Millisecond):
		}
	}
	return took
}

// jitterC2N makes every c2n answer reach control after a random delay of
// up to 300 ms, so answers arrive out of order, as they may in a loaded
// cluster. It must run before any node connects: testcontrol hands its
// mux to each Noise connection when the connection opens.
func jitterC2N(tn *Tailnet) {
	orig := *tn.fields.mux
	m := http.NewServeMux()
	m.Handle("/", orig)
	m.HandleFunc("/c2n/", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-time.After(rand.N(300 * time.Millisecond)):
		case <-r.Context().Done():
		}
		orig.ServeHTTP(w, r)
	})
	*tn.fields.mux = m
}

// restartBothReplicas runs the ProxyGroup failover of issue 15: two
// replicas host svc:web; replica a restarts a few times (stopped by stopA,
// then a new process on the same state advertises again), and control
// must learn each time within a second that the new process serves the
// service. Then b withdraws and stops: a client dialing the service all
// along must reach a within a second of b's withdrawal.
func restartBothReplicas(t *testing.T, stopA func(*replica)) {
	tn := startForTest(t)
	jitterC2N(tn)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	a := newReplica(ctx, t, tn, "replica-a")
	b := newReplica(ctx, t, tn, "replica-b")
	a.start(ctx, "a", 8000)
	b.start(ctx, "b", 8000)
	client := join(ctx, t, tn, "client")
	waitLearned(ctx, t, tn, a, 8000)
	waitLearned(ctx, t, tn, b, 8000)
	v4, v6 := createService(ctx, t, tn, tsapi.Service{Name: "svc:web", Ports: []string{"tcp:80"}})
	waitAnswer(ctx, t, client, "web.test.ts.net:80", "a")
	waitCarried(ctx, t, client, "replica-a", v4, v6)

	const restarts = 8
	for i := range uint16(restarts) {
		stopA(a)
		waitAnswer(ctx, t, client, "web.test.ts.net:80", "b")
		last := 8010 + 10*i + 2
		a.start(ctx, "a again", last-1, last)
		took := waitLearned(ctx, t, tn, a, last)
		t.Logf("restart %d: control learned what the restarted replica serves %v after it advertised", i+1, took.Round(time.Millisecond))
		if took > time.Second {
			t.Errorf("restart %d: control learned what the restarted replica serves only %v after it advertised, want under 1 s", i+1, took)
		}
	}
	// The client reaches the restarted a's own address: a WireGuard
	// session with a new process of a peer can take seconds, whatever
	// control does.
	waitAnswer(ctx, t, client, net.JoinHostPort(a.ip.String(), "81"), "alive")

	addr := net.JoinHostPort(v4.String(), "80")
	withdrawn := time.Now()
	b.withdraw(ctx)
	b.kill()
	lastB, failures := withdrawn, 0
	for {
		try, done := context.WithTimeout(ctx, 250*time.Millisecond)
		got, err := ask(try, client, addr)
		done()
		now := time.Now()
		switch {
		case got == "a again":
			gap := now.Sub(withdrawn)
			t.Logf("%v from b's withdrawal to the first answer from the restarted a (%v since b's last answer, %d failed tries)", gap.Round(time.Millisecond), now.Sub(lastB).Round(time.Millisecond), failures)
			if gap > time.Second {
				t.Fatalf("the service was unreachable for %v after b withdrew, want under 1 s", gap)
			}
			waitCarried(ctx, t, client, "replica-a", v4, v6)
			return
		case got == "b":
			lastB = now
		default:
			failures++
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the client never reached the restarted a: last %q, %v (control routes svc:web to %q)", got, err, primaryOf(tn, "svc:web"))
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// A replica that withdraws its services, stops and comes back on its
// state (a ProxyGroup pod deleted and restarted by its StatefulSet)
// carries the service again when the other replica goes away.
func TestServiceHostRestartedAfterWithdrawal(t *testing.T) {
	restartBothReplicas(t, func(r *replica) { r.withdraw(context.Background()); r.kill() })
}

// The same for a replica killed without withdrawing (SIGKILL).
func TestServiceHostRestartedAfterKill(t *testing.T) {
	restartBothReplicas(t, func(r *replica) { r.kill() })
}
