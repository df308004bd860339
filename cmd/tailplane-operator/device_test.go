package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"tailscale.com/tailcfg"

	"github.com/tailplane/tailplane/internal/tailnet"
	"github.com/tailplane/tailplane/internal/tailnet/tailnettest"
	realtailnet "github.com/tailplane/tailplane/internal/tailnettest"
)

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
	_, metrics := get(h.env["TAILPLANE_METRICS_ADDR"], "/metrics")
	wantMetric := `tailplane_operator_tailnet_device_info{hostname="tailscale-operator",ips="` + strings.Join(probeIPs(probe), ",") +
		`",name="tailscale-operator.` + realtailnet.MagicDNSDomain + `",node_id="` + string(node.StableID) + `"} 1`
	if !strings.Contains(metrics, wantMetric) {
		t.Errorf("/metrics lacks %s", wantMetric)
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

func probeIPs(probe map[string]any) []string {
	var out []string
	ips, _ := probe["ips"].([]any)
	for _, ip := range ips {
		out = append(out, fmt.Sprint(ip))
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
			// Before it holds the Lease the replica is a standby, and
			// standbys are ready (runtime.Operator.Ready); once it leads
			// and waits for its device, it must not be.
			if ready == http.StatusOK && sawWaiting {
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

// A device whose node key control expired (as when it is deleted from the
// admin console) needs a login: on the next start the operator mints a new
// key and the device runs again under its hostname and tags.
func TestDeviceLogsInAgainWhenControlExpiredIt(t *testing.T) {
	h := newDeviceHarness(t, nil)
	op := h.start(t)
	h.waitReady(t, op)
	if err := op.stop(t); err != nil {
		t.Fatalf("graceful stop: %v", err)
	}
	nodes := h.operatorNodes("tailscale-operator")
	if len(nodes) != 1 {
		t.Fatalf("control has %d operator nodes, want 1", len(nodes))
	}
	expired := nodes[0].Clone()
	expired.KeyExpiry = time.Now().Add(-time.Minute)
	h.tn.Control.UpdateNode(expired)

	again := h.start(t)
	// testcontrol keeps the expired time on the node keys that replace the
	// expired one; Tailscale gives a re-authenticated key a fresh expiry.
	// Do that for every new key, once the new auth key was minted, until the
	// operator is ready.
	deadline := time.After(time.Minute)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for ready := false; !ready; {
		select {
		case <-deadline:
			t.Fatalf("not ready within a minute; keys %+v; log:\n%s", h.api.Keys(), again.log)
		case <-tick.C:
		}
		if len(h.api.Keys()) < 2 {
			continue
		}
		for _, n := range h.operatorNodes("tailscale-operator") {
			if n.Key != expired.Key && !n.KeyExpiry.IsZero() {
				n.KeyExpiry = time.Time{}
				h.tn.Control.UpdateNode(n)
			}
		}
		code, _ := get(h.env["TAILPLANE_HEALTH_ADDR"], "/readyz")
		ready = code == http.StatusOK
	}
	probe := h.waitReady(t, again)
	keys := h.api.Keys()
	if len(keys) != 2 || !slices.Equal(keys[1].Tags, []string{"tag:k8s-operator"}) {
		t.Fatalf("keys minted: %+v, want a second one with tag:k8s-operator", keys)
	}
	// The login rotates the node key (testcontrol keeps the rotated-out
	// entries until a follow-up); the device runs under a new one.
	var renewed []*tailcfg.Node
	for _, n := range h.operatorNodes("tailscale-operator") {
		if n.Key != expired.Key && string(n.StableID) == probe["nodeID"] {
			renewed = append(renewed, n)
		}
	}
	if len(renewed) == 0 || !slices.Equal(renewed[0].Tags, []string{"tag:k8s-operator"}) || probe["state"] != "Running" {
		t.Fatalf("operator nodes with a new key %v (probe %v), want the running device tagged tag:k8s-operator", nodeIDs(renewed), probe)
	}
}

// An API that refuses the operator's tags (an OAuth client without
// tag:k8s-operator) stops the operator at once with the API's own message.
func TestDeviceKeyRefused(t *testing.T) {
	h := newDeviceHarness(t, nil)
	h.api.Fail(tailnettest.EndpointKeys, tailnettest.Failure{Status: http.StatusBadRequest, Message: "requested tags [tag:k8s-operator] are invalid or not permitted"})
	op := h.start(t)
	select {
	case err := <-op.done:
		op.done <- err
		want := "mint the auth key of the operator's tailnet device (tags tag:k8s-operator): tailnet API: create auth key: requested tags [tag:k8s-operator] are invalid or not permitted (HTTP 400)"
		if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "\n") {
			t.Fatalf("run returned %v, want one line containing %q", err, want)
		}
	case <-time.After(time.Minute):
		t.Fatalf("operator still running after a minute; log:\n%s", op.log)
	}
	if n := len(h.tn.Control.AllNodes()); n != 0 {
		t.Errorf("control has %d nodes, want none", n)
	}
}

// The operator device's keys carry its description: a key minted before a
// crash and never used is revoked before the next one is minted, and once
// the device joined no key of it can create another device.
func TestDeviceRevokesItsLeftoverKeys(t *testing.T) {
	h := newDeviceHarness(t, nil)
	backend, err := tailnet.NewTailscale(tailnet.Options{LoginServer: h.api.URL, ClientID: tailnettest.ClientID, ClientSecret: tailnettest.ClientSecret})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	leftover, err := backend.MintAuthKey(ctx, tailnet.KeyRequest{Tags: []string{"tag:k8s-operator"}, Preauthorized: true, Description: "tailplane operator tailscale-operator"})
	if err != nil {
		t.Fatal(err)
	}
	op := h.start(t)
	h.waitReady(t, op)
	if !slices.Contains(h.api.Revoked(), leftover.ID) {
		t.Errorf("the leftover key %s was not revoked (revoked: %v)", leftover.ID, h.api.Revoked())
	}
	keys := h.api.Keys()
	if len(keys) != 2 || keys[1].Description != "tailplane operator tailscale-operator" {
		t.Fatalf("keys %+v, want the leftover and one new key described for the operator", keys)
	}
	// The fake API does not learn that control spent the new key: the
	// operator revokes it as unused once its device runs, which real
	// control makes unnecessary (a spent key is invalid already).
	if valid := h.api.ValidUnusedKeys(); len(valid) != 0 {
		t.Fatalf("keys that can still create a device: %+v", valid)
	}
}
