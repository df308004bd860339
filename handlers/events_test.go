package handlers_test

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"

	"github.com/tailplane/tailplane/handlers/connector"
	"github.com/tailplane/tailplane/handlers/lib/cluster"
	"github.com/tailplane/tailplane/internal/testpoll"
	"github.com/tailplane/tailplane/runtime"
)

// events counts the Events about an object by type and reason (each Event's
// count: the recorder folds repeats into one Event), and lists the messages.
func (h *harness) events(namespace, name, eventType, reason string) (int, []string) {
	h.t.Helper()
	list, err := h.kube.CoreV1().Events(namespace).List(h.ctx(), metav1.ListOptions{FieldSelector: "involvedObject.name=" + name})
	if err != nil {
		h.t.Fatal(err)
	}
	n, msgs := 0, []string(nil)
	for _, e := range list.Items {
		if e.Type == eventType && e.Reason == reason {
			n += max(int(e.Count), 1)
			msgs = append(msgs, e.Message)
		}
	}
	return n, msgs
}

// restartUntilHandled restarts the operator times times, each time until it
// handled the object name again (a resume, seen in the runtime's Normal
// Event).
func (h *harness) restartUntilHandled(name string, times int) {
	h.t.Helper()
	for i := range times {
		resumed, _ := h.events(h.ns, name, corev1.EventTypeNormal, runtime.ReasonHandled)
		h.restart()
		testpoll.Until(h.t, settle, fmt.Sprintf("restart %d handled %s", i+1, name), func() error {
			if n, _ := h.events(h.ns, name, corev1.EventTypeNormal, runtime.ReasonHandled); n <= resumed {
				return fmt.Errorf("%d handled Events, as before the restart", n)
			}
			return nil
		})
	}
}

// A refused Service gets its Warning once: every operator start handles it
// again (a resume, seen in the runtime's Normal Event), and none posts the
// same INVALIDSERVICE again, since the stored condition already says it. A
// new cause (another refusal) is posted.
func TestWarningNotPostedAgainAtRestart(t *testing.T) {
	h := newHarness(t, nil)
	h.createService(exposed("bad", map[string]string{"tailscale.com/hostname": "not_a_label"}))
	h.wantCondition("bad", "False", "ProxyInvalid", "not_a_label")
	h.wantEvent(h.ns, "bad", corev1.EventTypeWarning, "INVALIDSERVICE", "not_a_label")
	h.restartUntilHandled("bad", 3)
	if n, msgs := h.events(h.ns, "bad", corev1.EventTypeWarning, "INVALIDSERVICE"); n != 1 {
		t.Fatalf("%d INVALIDSERVICE Events after 3 restarts, want 1: %q", n, msgs)
	}
	h.patchService("bad", `{"metadata":{"annotations":{"tailscale.com/hostname":"still_bad"}}}`)
	h.wantEvent(h.ns, "bad", corev1.EventTypeWarning, "INVALIDSERVICE", "still_bad")
}

// An Ingress has no condition to remember what it was told: its Warning is
// still posted once, since the operator finds the same Warning about the
// same Ingress already in the cluster after a restart.
func TestIngressWarningNotPostedAgainAtRestart(t *testing.T) {
	h := newHarness(t, nil)
	h.createIngressClass(false)
	h.createIngress("missing", nil, networkingv1.IngressSpec{DefaultBackend: defaultBackend("nope", 80)})
	h.wantEvent(h.ns, "missing", corev1.EventTypeWarning, "InvalidIngressBackend", "nope")
	h.restartUntilHandled("missing", 2)
	// The poster goroutine works after the handler: give a repeat every
	// chance to show before counting.
	testpoll.Always(t, 2*time.Second, "one InvalidIngressBackend Event", func() error {
		if n, msgs := h.events(h.ns, "missing", corev1.EventTypeWarning, "InvalidIngressBackend"); n != 1 {
			return fmt.Errorf("%d InvalidIngressBackend Events after 2 restarts, want 1: %q", n, msgs)
		}
		return nil
	})
}

// writeCounter counts the requests that may write (everything but GET,
// LIST and WATCH) to the operator namespace.
type writeCounter struct {
	next      http.RoundTripper
	namespace string
	mu        sync.Mutex
	writes    []string
}

func (c *writeCounter) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method != http.MethodGet && strings.Contains(r.URL.Path, "/namespaces/"+c.namespace+"/") {
		c.mu.Lock()
		c.writes = append(c.writes, r.Method+" "+r.URL.Path)
		c.mu.Unlock()
	}
	return c.next.RoundTrip(r)
}

func (c *writeCounter) since(n int) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.writes[n:])
}

func (c *writeCounter) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.writes)
}

// An exposed ExternalName Service whose name does not resolve is checked
// again every ResolveRetry; its proxy's objects do not change, so those
// re-checks write none of them, even once the applies' refresh is over.
func TestExternalNameRecheckWritesNothing(t *testing.T) {
	h := newHarness(t, nil)
	h.stop()
	counter := &writeCounter{namespace: h.opNS}
	h.adjustDeps = func(d *cluster.Deps) {
		cfg := env.Config(t)
		cfg.QPS, cfg.Burst = 200, 400
		cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { counter.next = rt; return counter })
		d.Dyn = dynamic.NewForConfigOrDie(cfg)
		d.ApplyRefresh = 100 * time.Millisecond
	}
	h.start()
	svc := exposed("ext", nil)
	svc.Spec.Type, svc.Spec.ExternalName = corev1.ServiceTypeExternalName, "db.example.test"
	h.createService(svc)
	testpoll.Until(t, settle, "proxy objects", func() error { return h.proxyExists("svc", "ext") })
	h.simulateLogin("svc", "ext", "nEXT", h.ns+"-ext.tail1.ts.net", "100.64.0.21")
	h.wantCondition("ext", "False", "ProxyFailed", `does not resolve`)

	// Two re-checks (ResolveRetry, 300 ms each) after the condition
	// settled, each past the applies' refresh: seen as two more lookups.
	lookups := h.dns.lookups("db.example.test")
	before := counter.count()
	testpoll.Until(t, settle, "two re-checks", func() error {
		if n := h.dns.lookups("db.example.test"); n < lookups+2 {
			return fmt.Errorf("%d lookups since", n-lookups)
		}
		return nil
	})
	if w := counter.since(before); len(w) > 0 {
		t.Fatalf("re-checks of an unchanged proxy wrote %d times: %q", len(w), w)
	}
}

// Routes a policy approves a moment after the device advertises them earn
// no RoutesNotApproved: the Connector waits for the grace (RoutesApproved
// False, RoutesPendingApproval) and sees them approved. Routes still
// unapproved after it are warned about once, and the condition says so.
func TestRoutesNotApprovedAfterTheGraceOnly(t *testing.T) {
	h := newHarness(t, nil)
	h.stop()
	h.adjustDeps = func(d *cluster.Deps) { d.RouteApprovalGrace = 2 * time.Second }
	h.start()
	c := h.connector(`{"hostnamePrefix":"sr","replicas":2,"subnetRouter":{"advertiseRoutes":["10.42.0.0/16"]}}`)
	testpoll.Until(t, settle, "replica configs", func() error {
		_, err0 := c.config(0)
		_, err1 := c.config(1)
		return errors.Join(err0, err1)
	})
	c.login(0)
	c.login(1)
	c.wantReady("True", "ConnectorCreated", "ConnectorCreated", 2)
	routes := func(status, reason, msgPart string) {
		t.Helper()
		testpoll.Until(t, settle, "RoutesApproved "+reason, func() error {
			got := meta.FindStatusCondition(c.get().Status.Conditions, connector.ConditionRoutesApproved)
			if got == nil || string(got.Status) != status || got.Reason != reason || !strings.Contains(got.Message, msgPart) {
				return fmt.Errorf("condition %+v", got)
			}
			return nil
		})
	}

	// Replica 0: auto-approved within the grace.
	c.reportRoutes(0, []string{"10.42.0.0/16"}, nil)
	routes("False", connector.ReasonRoutesPendingApproval, "10.42.0.0/16 by sr-0")
	c.reportRoutes(0, []string{"10.42.0.0/16"}, []string{"10.42.0.0/16"})
	routes("True", connector.ReasonRoutesApproved, "")

	// Replica 1: never approved; its grace ends after replica 0's.
	c.reportRoutes(1, []string{"10.42.0.0/16"}, nil)
	routes("False", connector.ReasonRoutesNotApproved, "10.42.0.0/16 by sr-1. Approve them in the tailnet's admin console")
	h.wantEvent("default", c.name, corev1.EventTypeWarning, connector.ReasonRoutesNotApproved, "by sr-1")
	if _, msgs := h.events("default", c.name, corev1.EventTypeWarning, connector.ReasonRoutesNotApproved); slices.ContainsFunc(msgs, func(m string) bool {
		return strings.Contains(m, "by sr-0")
	}) {
		t.Fatalf("warned about routes approved within the grace: %q", msgs)
	}

	// A restart warns no more.
	resumed, _ := h.events("default", c.name, corev1.EventTypeNormal, runtime.ReasonHandled)
	h.restart()
	testpoll.Until(t, settle, "restart handled the Connector", func() error {
		if n, _ := h.events("default", c.name, corev1.EventTypeNormal, runtime.ReasonHandled); n <= resumed {
			return fmt.Errorf("%d handled Events, as before the restart", n)
		}
		return nil
	})
	routes("False", connector.ReasonRoutesNotApproved, "by sr-1")
	if n, msgs := h.events("default", c.name, corev1.EventTypeWarning, connector.ReasonRoutesNotApproved); n != 1 {
		t.Fatalf("%d RoutesNotApproved Events, want 1: %q", n, msgs)
	}
}

// On Headscale, RoutesNotApproved names the command that approves the
// routes, not Tailscale's admin console.
func TestRoutesNotApprovedOnHeadscale(t *testing.T) {
	h := newHeadscaleHarness(t)
	h.stop()
	h.adjustDeps = func(d *cluster.Deps) { d.RouteApprovalGrace = 200 * time.Millisecond }
	h.start()
	c := h.connector(`{"hostnamePrefix":"sr","subnetRouter":{"advertiseRoutes":["10.42.0.0/16"]}}`)
	testpoll.Until(t, settle, "replica config", func() error { _, err := c.config(0); return err })
	id := c.login(0)
	c.reportRoutes(0, []string{"10.42.0.0/16"}, nil)
	h.wantEvent("default", c.name, corev1.EventTypeWarning, connector.ReasonRoutesNotApproved,
		fmt.Sprintf("`headscale nodes approve-routes --identifier %s --routes 10.42.0.0/16` (sr-0)", id))
	if _, msgs := h.events("default", c.name, corev1.EventTypeWarning, connector.ReasonRoutesNotApproved); slices.ContainsFunc(msgs, func(m string) bool {
		return strings.Contains(m, "admin console")
	}) {
		t.Fatalf("names Tailscale's admin console on Headscale: %q", msgs)
	}
}

// A Connector refused for a bad route keeps the last valid route in
// status.subnetRoutes: the refused one reached no device.
func TestConnectorStatusKeepsTheLastValidRoute(t *testing.T) {
	h := newHarness(t, nil)
	c := h.connector(`{"subnetRouter":{"advertiseRoutes":["10.42.0.0/16"]}}`)
	testpoll.Until(t, settle, "replica config", func() error { _, err := c.config(0); return err })
	c.login(0)
	c.wantReady("True", "ConnectorCreated", "ConnectorCreated", 1)
	if got := c.get().Status.SubnetRoutes; got != "10.42.0.0/16" {
		t.Fatalf("subnetRoutes %q", got)
	}
	c.patch(`{"subnetRouter":{"advertiseRoutes":["10.42.0.1/16"]}}`)
	c.wantReady("False", "ConnectorInvalid", "non-address bits", 0)
	if got := c.get().Status.SubnetRoutes; got != "10.42.0.0/16" {
		t.Fatalf("subnetRoutes %q under a refused spec, want the last valid 10.42.0.0/16", got)
	}
}
