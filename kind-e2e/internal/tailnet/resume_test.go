package tailnet

import (
	"context"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/log"
	tsapi "tailscale.com/client/tailscale/v2"
	"tailscale.com/control/controlhttp"
	"tailscale.com/tailcfg"
	"tailscale.com/tsnet"
	"tailscale.com/types/key"
)

// startAt starts a tailnet on state and addr (host:port, or 127.0.0.1:0).
func startAt(t *testing.T, state, addr string) *Tailnet {
	t.Helper()
	tn, err := Start(t.Context(), Config{StateFile: state, Addr: addr, MagicDNSDomain: "test.ts.net", Logger: log.New(io.Discard)})
	if err != nil {
		t.Fatal(err)
	}
	return tn
}

func controlKey(t *testing.T, tn *Tailnet) string {
	t.Helper()
	resp, err := http.Get(tn.URL + "/key?v=1")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// A restarted tailnet on the same state is the same tailnet: same control
// keys, the same Tailscale Services with the same addresses, a node with saved state rejoins without an auth key and keeps its
// IP, and a node that kept running through the restart reconnects on its
// own (it reuses the control key it knows, over /ts2021, without /key).
func TestRestartResumesTheTailnet(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	state := filepath.Join(t.TempDir(), "state.json")
	first := startAt(t, state, "127.0.0.1:0")
	addr := strings.TrimPrefix(first.URL, "http://")
	key1 := controlKey(t, first)

	var req tsapi.CreateKeyRequest
	req.Capabilities.Devices.Create.Reusable = true
	req.Capabilities.Devices.Create.Preauthorized = true
	k, err := client(t, first, first.ClientSecret).Keys().CreateAuthKey(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	keeperDir := t.TempDir()
	node := func(name, authKey, dir string) *tsnet.Server {
		s := &tsnet.Server{ControlURL: first.URL, Hostname: name, AuthKey: authKey, Dir: dir, Logf: func(string, ...any) {}, UserLogf: func(string, ...any) {}}
		t.Cleanup(func() { _ = s.Close() })
		return s
	}
	keeper := node("keeper", k.Key, keeperDir)
	st, err := keeper.Up(ctx)
	if err != nil {
		t.Fatal(err)
	}
	keeperIP := st.TailscaleIPs[0]
	runner := node("runner", k.Key, t.TempDir())
	st, err = runner.Up(ctx)
	if err != nil {
		t.Fatal(err)
	}
	runnerKey := st.Self.PublicKey
	if err := keeper.Close(); err != nil {
		t.Fatal(err)
	}
	svcs := client(t, first, first.ClientSecret).VIPServices()
	if err := svcs.CreateOrUpdate(ctx, tsapi.Service{Name: "svc:kept", Ports: []string{"tcp:443"}, Tags: []string{"tag:k8s"}}); err != nil {
		t.Fatal(err)
	}
	kept, err := svcs.Get(ctx, "svc:kept")
	if err != nil {
		t.Fatal(err)
	}
	first.Close()

	second := startAt(t, state, addr)
	defer second.Close()
	if got := controlKey(t, second); got != key1 {
		t.Fatalf("control keys changed across the restart:\n%s\n%s", key1, got)
	}
	// Tailscale Services stay, with their addresses.
	after, err := client(t, second, second.ClientSecret).VIPServices().Get(ctx, "svc:kept")
	if err != nil || !slices.Equal(after.Addrs, kept.Addrs) || !slices.Equal(after.Tags, kept.Tags) || !slices.Equal(after.Ports, kept.Ports) {
		t.Fatalf("service after the restart = %+v, %v; want %+v", after, err, kept)
	}
	again := node("keeper", "", keeperDir)
	st, err = again.Up(ctx)
	if err != nil {
		t.Fatalf("the keeper did not rejoin without an auth key: %v", err)
	}
	if got := st.TailscaleIPs[0]; got != keeperIP {
		t.Fatalf("the keeper's IP changed across the restart: %v, then %v", keeperIP, got)
	}
	if err := second.Control.AwaitNodeInMapRequest(ctx, runnerKey); err != nil {
		t.Fatalf("the node that kept running did not reconnect to the restarted control server: %v", err)
	}
	// The node that kept running reaches the resumed one over the tailnet.
	ln, err := again.Listen("tcp", ":80")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "kept") })}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DialContext: runner.Dial}}
	for {
		resp, err := hc.Get("http://" + keeperIP.String() + "/")
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if string(body) == "kept" {
				return
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("runner cannot reach the keeper after the restart: %v", err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// A client that knows the control key (it ran before the restart) opens
// Noise on /ts2021 without fetching /key first. testcontrol made its keys
// on the first /key, and panicked on such a connection.
func TestNoiseBeforeKey(t *testing.T) {
	tn := startForTest(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	noise, _, err := tn.store.controlKeys()
	if err != nil {
		t.Fatal(err)
	}
	host, port, err := net.SplitHostPort(strings.TrimPrefix(tn.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	d := &controlhttp.Dialer{Hostname: host, HTTPPort: port, HTTPSPort: controlhttp.NoPort,
		MachineKey: key.NewMachine(), ControlKey: noise.Public(),
		ProtocolVersion: uint16(tailcfg.CurrentCapabilityVersion), Logf: t.Logf}
	conn, err := d.Dial(ctx)
	if err != nil {
		t.Fatalf("Noise handshake before any /key: %v", err)
	}
	conn.Close()
}
