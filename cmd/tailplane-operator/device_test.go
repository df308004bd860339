package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"tailscale.com/tailcfg"

	"github.com/tailplane/tailplane/crds"
	"github.com/tailplane/tailplane/internal/tailnet/tailnettest"
	realtailnet "github.com/tailplane/tailplane/internal/tailnettest"
	"github.com/tailplane/tailplane/internal/testenv"
)

var installCRDs sync.Once

// deviceHarness is a tailnet whose login server serves both the control
// protocol (the real testcontrol, with DERP and STUN) and the admin API
// (the SaaS API double), as Tailscale's does, plus an operator namespace.
type deviceHarness struct {
	api *tailnettest.Server
	tn  *realtailnet.Tailnet
	url string
	env map[string]string
	ns  string
}

// newDeviceHarness starts the tailnet; control, when not nil, replaces the
// control server (e.g. with one that is down).
func newDeviceHarness(t *testing.T, control http.Handler) *deviceHarness {
	t.Helper()
	installCRDs.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		objs, err := crds.Objects()
		if err == nil {
			err = testenv.InstallCRDs(ctx, dynamic.NewForConfigOrDie(env.Config(t)), objs...)
		}
		if err != nil {
			t.Fatalf("install CRDs: %v", err)
		}
	})
	h := &deviceHarness{api: tailnettest.NewServer(), ns: env.Namespace(t)}
	t.Cleanup(h.api.Close)
	h.tn = realtailnet.New(t, realtailnet.WithTagOwners(map[string][]string{"tag:k8s-operator": nil, "tag:k8s": {"tag:k8s-operator"}}))
	if control == nil {
		control = h.tn.Control
	}
	mux := http.NewServeMux()
	mux.Handle("/api/v2/", h.api.Config.Handler)
	mux.Handle("/", control)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	h.url = srv.URL
	idFile, secretFile := writeCreds(t, tailnettest.ClientID, tailnettest.ClientSecret)
	h.env = map[string]string{
		"OPERATOR_NAMESPACE": h.ns, "OPERATOR_LOGIN_SERVER": h.url, "OPERATOR_SECRET": "operator",
		"CLIENT_ID_FILE": idFile, "CLIENT_SECRET_FILE": secretFile,
		"KUBECONFIG":                filepath.Join(env.Dir(), "kubeconfig"),
		"TAILPLANE_WATCH_NAMESPACE": h.ns, "TAILPLANE_HEALTH_ADDR": freeAddr(t), "TAILPLANE_METRICS_ADDR": "-",
		"OPERATOR_LOGGING": "debug", "TMPDIR": t.TempDir(),
	}
	return h
}

func freeAddr(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// runningOperator is one run of the operator.
type runningOperator struct {
	cancel  context.CancelFunc
	done    chan error
	started time.Time
	log     *syncBuffer
}

// start runs the operator until stop.
func (h *deviceHarness) start(t *testing.T) *runningOperator {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	op := &runningOperator{cancel: cancel, done: make(chan error, 1), started: time.Now(), log: &syncBuffer{}}
	go func() { op.done <- run(ctx, envOf(h.env), op.log) }()
	t.Cleanup(func() {
		cancel()
		<-op.done
	})
	return op
}

// stop ends the run as SIGTERM does and returns run's error.
func (op *runningOperator) stop(t *testing.T) error {
	t.Helper()
	op.cancel()
	select {
	case err := <-op.done:
		op.done <- err // for the cleanup
		return err
	case <-time.After(time.Minute):
		t.Fatalf("operator did not stop within a minute; log:\n%s", op.log)
		return nil
	}
}

// waitReady polls /readyz until 200 and returns /healthz's device entry.
func (h *deviceHarness) waitReady(t *testing.T, op *runningOperator) map[string]any {
	t.Helper()
	deadline := time.After(90 * time.Second)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case err := <-op.done:
			t.Fatalf("operator exited: %v; log:\n%s", err, op.log)
		case <-deadline:
			t.Fatalf("operator not ready in 90s; log:\n%s", op.log)
		case <-tick.C:
		}
		if code, _ := get(h.env["TAILPLANE_HEALTH_ADDR"], "/readyz"); code == http.StatusOK {
			_, body := get(h.env["TAILPLANE_HEALTH_ADDR"], "/healthz")
			var out map[string]map[string]any
			if err := json.Unmarshal([]byte(body), &out); err != nil {
				t.Fatalf("/healthz: %v: %s", err, body)
			}
			return out["tailnetDevice"]
		}
	}
}

func get(addr, path string) (int, string) {
	resp, err := http.Get("http://" + addr + path)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// operatorNodes are control's nodes with the operator's hostname.
func (h *deviceHarness) operatorNodes(hostname string) []*tailcfg.Node {
	var out []*tailcfg.Node
	for _, n := range h.tn.Control.AllNodes() {
		if n.Hostinfo.Hostname() == hostname {
			out = append(out, n)
		}
	}
	return out
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// The operator joins the tailnet as tailscale-operator with
// tag:k8s-operator before it handles anything, keeps the node's state in
// Secret OPERATOR_SECRET, and after a restart is the same node again, with
// no new auth key.
func TestOperatorDeviceJoinsAndSurvivesRestart(t *testing.T) {
	h := newDeviceHarness(t, nil)
	op := h.start(t)
	probe := h.waitReady(t, op)
	ready := time.Since(op.started)

	nodes := h.operatorNodes("tailscale-operator")
	if len(nodes) != 1 {
		t.Fatalf("control has %d nodes named tailscale-operator, want 1; log:\n%s", len(nodes), op.log)
	}
	node := nodes[0]
	if !slices.Equal(node.Tags, []string{"tag:k8s-operator"}) {
		t.Errorf("device tags %v, want [tag:k8s-operator]", node.Tags)
	}
	if want := realtailnet.FQDN("tailscale-operator") + "."; node.Name != want {
		t.Errorf("device name %q, want %q", node.Name, want)
	}
	if probe["state"] != "Running" || probe["nodeID"] != string(node.StableID) {
		t.Errorf("/healthz tailnetDevice = %v, want Running with node ID %s", probe, node.StableID)
	}
	keys := h.api.Keys()
	if len(keys) != 1 || !slices.Equal(keys[0].Tags, []string{"tag:k8s-operator"}) || !keys[0].Preauthorized || keys[0].Reusable || keys[0].Ephemeral {
		t.Fatalf("auth keys minted: %+v, want one preauthorized, single-use, non-ephemeral key with tag:k8s-operator", keys)
	}
	sec, err := env.Clientset(t).CoreV1().Secrets(h.ns).Get(context.Background(), "operator", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("state Secret: %v", err)
	}
	for _, k := range []string{"_current-profile", "_machinekey"} {
		if len(sec.Data[k]) == 0 {
			t.Errorf("state Secret lacks %s (has %v)", k, keysOf(sec.Data))
		}
	}
	t.Logf("operator start to ready (device Running, handlers started): %s; device: %s", ready.Round(time.Millisecond), deviceLine(op.log.String()))

	if err := op.stop(t); err != nil {
		t.Fatalf("graceful stop: %v", err)
	}
	again := h.start(t)
	probe = h.waitReady(t, again)
	t.Logf("restart to ready: %s; device: %s", time.Since(again.started).Round(time.Millisecond), deviceLine(again.log.String()))
	if n := len(h.api.Keys()); n != 1 {
		t.Errorf("%d auth keys minted after the restart, want still 1", n)
	}
	nodes = h.operatorNodes("tailscale-operator")
	if len(nodes) != 1 || nodes[0].StableID != node.StableID || nodes[0].Key != node.Key {
		t.Fatalf("after the restart control has %d operator nodes (%v), want the same one %s/%s", len(nodes), nodeIDs(nodes), node.StableID, node.Key.ShortString())
	}
	if probe["nodeID"] != string(node.StableID) {
		t.Errorf("/healthz after restart: %v", probe)
	}
}

// deviceLine is the operator's "device is running" log line.
func deviceLine(log string) string {
	for line := range strings.Lines(log) {
		if strings.Contains(line, "tailnet device is running") {
			return strings.TrimSpace(line)
		}
	}
	return "(none)"
}

func keysOf(m map[string][]byte) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func nodeIDs(nodes []*tailcfg.Node) []string {
	var out []string
	for _, n := range nodes {
		out = append(out, fmt.Sprintf("%s/%s", n.StableID, n.Key.ShortString()))
	}
	return out
}

// A bad hostname, tag, port or timeout stops the operator before it mints a
// key or touches the tailnet, with one line naming the variable.
func TestDeviceSettingsFailFast(t *testing.T) {
	api := tailnettest.NewServer()
	defer api.Close()
	idFile, secretFile := writeCreds(t, tailnettest.ClientID, tailnettest.ClientSecret)
	cases := []struct{ name, key, value, want string }{
		{"hostname with underscore", "OPERATOR_HOSTNAME", "tailscale_operator", `OPERATOR_HOSTNAME: "tailscale_operator" is not a valid DNS label: contains invalid character '_'`},
		{"hostname with leading dash", "OPERATOR_HOSTNAME", "-operator", `OPERATOR_HOSTNAME: "-operator" is not a valid DNS label: must start with a letter or number`},
		{"tag without prefix", "OPERATOR_INITIAL_TAGS", "k8s-operator", `OPERATOR_INITIAL_TAGS: invalid tag "k8s-operator": tags must start with 'tag:'`},
		{"port", "TS_PORT", "udp", `TS_PORT: "udp" is not a UDP port number`},
		{"timeout", "TAILPLANE_DEVICE_TIMEOUT", "soon", `TAILPLANE_DEVICE_TIMEOUT: "soon" is not a positive duration`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := map[string]string{
				"OPERATOR_NAMESPACE": "tailscale", "OPERATOR_LOGIN_SERVER": api.URL, "CLIENT_ID_FILE": idFile, "CLIENT_SECRET_FILE": secretFile,
				"KUBECONFIG": filepath.Join(env.Dir(), "kubeconfig"), "TAILPLANE_HEALTH_ADDR": "-", "TAILPLANE_METRICS_ADDR": "-", tc.key: tc.value,
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			began := time.Now()
			err := run(ctx, envOf(e), io.Discard)
			if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("got %v, want one line containing %q", err, tc.want)
			}
			if took := time.Since(began); took > 10*time.Second {
				t.Errorf("failing took %s", took)
			}
		})
	}
	if keys := api.Keys(); len(keys) != 0 {
		t.Errorf("keys minted despite bad settings: %+v", keys)
	}
}

// With a control plane that does not answer, the operator says why in its
// log, keeps /healthz up (no liveness restarts) and /readyz down, handles
// nothing, and after TAILPLANE_DEVICE_TIMEOUT stops with one clear line.
func TestDeviceControlUnreachable(t *testing.T) {
	down := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "control is down", http.StatusServiceUnavailable)
	})
	h := newDeviceHarness(t, down)
	h.env["TAILPLANE_DEVICE_TIMEOUT"] = "4s"
	op := h.start(t)
	addr := h.env["TAILPLANE_HEALTH_ADDR"]
	var sawWaiting bool
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	var err error
wait:
	for {
		select {
		case err = <-op.done:
			op.done <- err
			break wait
		case <-time.After(time.Minute):
			t.Fatalf("operator still running after a minute; log:\n%s", op.log)
		case <-tick.C:
			ready, _ := get(addr, "/readyz")
			live, body := get(addr, "/healthz")
			if ready == http.StatusOK {
				t.Fatalf("/readyz is OK although the device cannot join")
			}
			if ready == http.StatusServiceUnavailable && live == http.StatusOK && strings.Contains(body, `"tailnetDevice"`) {
				sawWaiting = true
			}
		}
	}
	t.Logf("run returned: %v", err)
	if !sawWaiting {
		t.Errorf("never saw /readyz 503 with /healthz 200 while waiting; log:\n%s", op.log)
	}
	want := `the operator's tailnet device "tailscale-operator" did not reach Running within 4s (is the login server ` + h.url + ` reachable?`
	if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "\n") {
		t.Fatalf("run returned %v, want one line containing %q", err, want)
	}
	if !strings.Contains(op.log.String(), "the operator's tailnet device is not running yet") {
		t.Errorf("no waiting line in the log:\n%s", op.log)
	}
}

// Without OPERATOR_SECRET the state stays in the scratch folder (the
// official operator's behaviour): the device still joins, and no Secret is
// written.
func TestDeviceWithoutStateSecret(t *testing.T) {
	h := newDeviceHarness(t, nil)
	delete(h.env, "OPERATOR_SECRET")
	h.env["OPERATOR_HOSTNAME"] = "ts-op"
	op := h.start(t)
	probe := h.waitReady(t, op)
	nodes := h.operatorNodes("ts-op")
	if len(nodes) != 1 || !slices.Equal(nodes[0].Tags, []string{"tag:k8s-operator"}) || probe["nodeID"] != string(nodes[0].StableID) {
		t.Fatalf("control nodes %v, probe %v; want one ts-op tagged tag:k8s-operator", nodeIDs(nodes), probe)
	}
	secrets, err := env.Clientset(t).CoreV1().Secrets(h.ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(secrets.Items) != 0 {
		t.Errorf("Secrets written without OPERATOR_SECRET: %d", len(secrets.Items))
	}
}
