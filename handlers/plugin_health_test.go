package handlers_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/tailplane/tailplane/handlers/lib/resources"
	"github.com/tailplane/tailplane/internal/proxystate"
	"github.com/tailplane/tailplane/internal/testpoll"
)

// reportFollowed bounds how long the RoutingPlugin's status may trail a
// proxy's report: the operator reacts to the state Secret's change, so well
// under the 15 s of its timer.
const reportFollowed = 6 * time.Second

// What the proxies report of a plugin failing at run time shows in the
// RoutingPlugin: Degraded with the failure rate and the last error (the
// guest's panic message), the counts in loadedBy, one Warning Event (not
// one per flap), and Ready unchanged. Status follows each report as it is
// written. A newest spec that is refused while the previous module runs
// leaves Ready True and says which module serves.
func TestRoutingPluginRunTimeFailures(t *testing.T) {
	h, _, pin := canarySite(t)
	h.routingPlugin("canary", "canary", pin, "route")
	testpoll.Until(t, settle, "accepted", func() error {
		if st, msg, _ := h.pluginCondition("canary", "Accepted"); st != "True/Compiled" {
			return fmt.Errorf("%s %s", st, msg)
		}
		return nil
	})
	proxyName := h.names("ingress", "site").StateSecret
	report := func(r proxystate.PluginReport) time.Time {
		t.Helper()
		b, _ := json.Marshal([]proxystate.PluginReport{r})
		patch, _ := json.Marshal(map[string]any{"data": map[string][]byte{proxystate.KeyPluginStatus: b}})
		if _, err := h.kube.CoreV1().Secrets(h.opNS).Patch(h.ctx(), proxyName, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		return time.Now()
	}
	// follows waits for the status to show a report, within reportFollowed.
	follows := func(what string, since time.Time, check func() error) {
		t.Helper()
		testpoll.Until(t, settle, what, check)
		if took := time.Since(since); took > reportFollowed {
			t.Errorf("%s took %v after the proxy's report; want it within %v (on the report, not the timer)", what, took.Round(time.Millisecond), reportFollowed)
		}
	}
	condition := func(typ, want string, msgParts ...string) func() error {
		return func() error {
			st, msg, _ := h.pluginCondition("canary", typ)
			if st != want {
				return fmt.Errorf("%s %s %s", typ, st, msg)
			}
			for _, p := range msgParts {
				if !strings.Contains(msg, p) {
					return fmt.Errorf("%s message %q lacks %q", typ, msg, p)
				}
			}
			return nil
		}
	}

	at := report(proxystate.PluginReport{Name: h.ns + "/canary", Loaded: true, SHA256: pin})
	follows("Ready", at, condition("Ready", "True/Loaded"))
	testpoll.Until(t, settle, "Degraded False", condition("Degraded", "False/NoRecentFailures"))

	lastErr := "plugin " + h.ns + "/canary: handle_request: wasm error: unreachable (guest: panic: no backend for tenant)"
	failing := func(requests, failed uint64) proxystate.PluginReport {
		now := time.Now().UTC().Truncate(time.Second)
		return proxystate.PluginReport{Name: h.ns + "/canary", Loaded: true, SHA256: pin, Failures: &proxystate.PluginFailures{
			Since: now.Add(-time.Hour), Requests: 1000 + requests, Failed: failed, ByClass: map[string]uint64{"trap": failed},
			WindowSeconds: 60, RecentRequests: requests, RecentFailed: failed, LastError: lastErr, LastFailure: now}}
	}
	at = report(failing(120, 120))
	follows("Degraded", at, condition("Degraded", "True/RequestsFailing", "120 of 120 requests failed (100%)", "in the last 60s", "1/1 proxies", proxyName, "panic: no backend for tenant"))
	if err := condition("Ready", "True/Loaded")(); err != nil {
		t.Errorf("a failing plugin still runs: %v", err)
	}
	_, _, obj := h.pluginCondition("canary", "Degraded")
	lb, _, _ := unstructured.NestedSlice(obj.Object, "status", "loadedBy")
	if len(lb) != 1 {
		t.Fatalf("loadedBy %v", lb)
	}
	f, _, _ := unstructured.NestedMap(lb[0].(map[string]any), "failures")
	if f["failed"] != int64(120) || f["recentFailed"] != int64(120) || f["requests"] != int64(1120) || f["lastError"] != lastErr || f["lastFailureTime"] == nil ||
		fmt.Sprint(f["byClass"]) != "map[trap:120]" {
		t.Errorf("loadedBy[0].failures = %v", f)
	}
	h.wantEvent(h.ns, "canary", corev1.EventTypeWarning, "RequestsFailing", "120 of 120 requests failed (100%)")

	// Partly failing: the rate follows.
	at = report(failing(200, 50))
	follows("the new rate", at, condition("Degraded", "True/RequestsFailing", "50 of 200 requests failed (25%)"))

	// The window clears, then the plugin fails again: one Event only.
	quiet := failing(0, 0)
	quiet.Failures.Failed, quiet.Failures.ByClass = 170, map[string]uint64{"trap": 170}
	at = report(quiet)
	follows("Degraded cleared", at, condition("Degraded", "False/NoRecentFailures"))
	at = report(failing(10, 10))
	follows("Degraded again", at, condition("Degraded", "True/RequestsFailing", "10 of 10"))
	at = report(quiet)
	follows("Degraded cleared again", at, condition("Degraded", "False/NoRecentFailures"))
	testpoll.Always(t, 2*time.Second, "one RequestsFailing Event", func() error {
		list, err := h.kube.CoreV1().Events(h.ns).List(h.ctx(), metav1.ListOptions{FieldSelector: "involvedObject.name=canary,reason=RequestsFailing"})
		if err != nil {
			return err
		}
		if len(list.Items) != 1 || list.Items[0].Count > 1 {
			return fmt.Errorf("%d Events %+v; want one for the two times the plugin started failing", len(list.Items), list.Items)
		}
		return nil
	})

	// A new pin that does not match: Accepted False, but the module the
	// proxy runs keeps serving, so Ready stays True and says so.
	badPin, _ := json.Marshal(map[string]any{"spec": map[string]any{"module": map[string]any{"sha256": strings.Repeat("0", 64)}}})
	if _, err := h.dyn.Resource(resources.RoutingPlugins).Namespace(h.ns).Patch(h.ctx(), "canary", types.MergePatchType, badPin, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	testpoll.Until(t, settle, "refused", condition("Accepted", "False/SHA256Mismatch"))
	testpoll.Until(t, settle, "Ready with the previous module", condition("Ready", "True/Loaded",
		"the newest spec is not accepted (SHA256Mismatch): the previous module (sha256 "+pin+") keeps serving"))
	_, _, obj = h.pluginCondition("canary", "Ready")
	if s, _, _ := unstructured.NestedString(obj.Object, "status", "sha256"); s != pin {
		t.Errorf("status.sha256 %s, want the serving %s", s, pin)
	}
	// It still follows the proxy's reports.
	at = report(failing(5, 5))
	follows("Degraded while refused", at, condition("Degraded", "True/RequestsFailing", "5 of 5"))
}
