package main

import (
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

	"k8s.io/client-go/dynamic"
	"tailscale.com/tailcfg"

	"github.com/tailplane/tailplane/crds"
	"github.com/tailplane/tailplane/internal/syncbuf"
	"github.com/tailplane/tailplane/internal/tailnet/tailnettest"
	realtailnet "github.com/tailplane/tailplane/internal/tailnettest"
	"github.com/tailplane/tailplane/internal/testenv"
)

// installCRDs installs the CRDs once per test binary: the runtime waits
// for the tailscale.com and tailplane.dev groups to be served.
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
	health := freeAddr(t)
	h.env = map[string]string{
		"OPERATOR_NAMESPACE": h.ns, "OPERATOR_LOGIN_SERVER": h.url, "OPERATOR_SECRET": "operator",
		"CLIENT_ID_FILE": idFile, "CLIENT_SECRET_FILE": secretFile,
		"KUBECONFIG":                filepath.Join(env.Dir(), "kubeconfig"),
		"TAILPLANE_WATCH_NAMESPACE": h.ns, "TAILPLANE_HEALTH_ADDR": health, "TAILPLANE_METRICS_ADDR": health,
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
	log     *syncbuf.Buffer
}

// start runs the operator until stop.
func (h *deviceHarness) start(t *testing.T) *runningOperator {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	op := &runningOperator{cancel: cancel, done: make(chan error, 1), started: time.Now(), log: &syncbuf.Buffer{}}
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
		// A replica waiting for the Lease is ready too (a standby), so
		// readiness alone does not say the device is up: wait for both.
		if code, _ := get(h.env["TAILPLANE_HEALTH_ADDR"], "/readyz"); code == http.StatusOK {
			_, body := get(h.env["TAILPLANE_HEALTH_ADDR"], "/healthz")
			var out map[string]map[string]any
			if err := json.Unmarshal([]byte(body), &out); err != nil {
				t.Fatalf("/healthz: %v: %s", err, body)
			}
			if out["tailnetDevice"]["nodeID"] != nil {
				return out["tailnetDevice"]
			}
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
