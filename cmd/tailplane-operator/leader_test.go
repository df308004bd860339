package main

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"
)

// An API server outage longer than the Lease's renew deadline (10 s) no
// longer stops the operator: it stops handling and stops its tailnet device
// (so that another replica could run it), stands by, and when the API
// server is back leads again with the same device, minting no new key.
func TestOperatorSurvivesAPIOutage(t *testing.T) {
	h := newDeviceHarness(t, nil)
	cut, _ := env.CutOff(t)
	h.env["KUBECONFIG"] = cut.Kubeconfig(t, env)
	op := h.start(t)
	probe := h.waitReady(t, op)
	nodeID := probe["nodeID"]

	hc := &http.Client{Timeout: 5 * time.Second}
	device := func() map[string]any {
		resp, err := hc.Get("http://" + h.env["TAILPLANE_HEALTH_ADDR"] + "/healthz")
		if err != nil {
			return map[string]any{"error": err.Error()}
		}
		defer resp.Body.Close()
		var out map[string]map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&out)
		return out["tailnetDevice"]
	}
	cut.Start()
	deadline := time.After(60 * time.Second)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for device()["state"] != "Stopped" || !strings.Contains(op.log.String(), "leadership lost") {
		select {
		case err := <-op.done:
			op.done <- err // for the harness's cleanup
			t.Fatalf("the operator exited during the outage: %v; log:\n%s", err, op.log)
		case <-deadline:
			t.Fatalf("60 s into the outage: device %v, or no leadership-lost line; log:\n%s", device(), op.log)
		case <-tick.C:
		}
	}
	if code, _ := get(h.env["TAILPLANE_HEALTH_ADDR"], "/readyz"); code != http.StatusOK {
		t.Errorf("/readyz = %d for a standby, want 200", code)
	}
	cut.End()
	probe = h.waitReady(t, op)
	if probe["nodeID"] != nodeID || probe["state"] != "Running" {
		t.Fatalf("after the outage the device is %v, want Running as node %v", probe, nodeID)
	}
	if n := len(h.api.Keys()); n != 1 {
		t.Errorf("%d auth keys minted, want still 1", n)
	}
	if nodes := h.operatorNodes("tailscale-operator"); len(nodes) != 1 {
		t.Errorf("control has %d operator nodes (%v), want 1", len(nodes), nodeIDs(nodes))
	}
	if err := op.stop(t); err != nil {
		t.Fatalf("graceful stop: %v", err)
	}
}
