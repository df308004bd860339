package host_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/tailplane/tailplane/internal/testpoll"
	"github.com/tailplane/tailplane/plugins/host"
	"github.com/tailplane/tailplane/plugins/sdk/abi"
	"github.com/tailplane/tailplane/proxy/route"
)

func misbehaving(t *testing.T, e *host.Engine, name string, cfg host.Config) *host.Plugin {
	t.Helper()
	cfg.Name = name
	if cfg.Timeout == 0 {
		// Generous: on a loaded CI machine a microsecond call can span
		// hundreds of ms of wall time; only the loop test needs a short one.
		cfg.Timeout = 10 * time.Second
	}
	cfg.Module = guest(t, "./plugins/host/testdata/misbehave")
	cfg.Capabilities = []abi.Capability{abi.CapRoute, abi.CapFunnel}
	return load(t, e, cfg)
}

// servesNormally checks the plugin still answers a plain request.
func servesNormally(t *testing.T, p *host.Plugin) {
	t.Helper()
	d, err := p.Route(context.Background(), request("/"), route.Decision{})
	if err != nil || d.Action != route.Forward || d.SetRequestHeaders.Get("X-Plugin") != "seen" {
		t.Fatalf("plain request after the failure: %+v, %v", d, err)
	}
}

// A guest that loops forever is killed at its deadline; fail-closed answers
// 503 without the error text, fail-open passes the request on unchanged.
func TestInfiniteLoopKilledAtDeadline(t *testing.T) {
	e, logs := newEngine(t)
	for _, policy := range []host.FailurePolicy{host.FailClosed, host.FailOpen} {
		t.Run(string(policy), func(t *testing.T) {
			name := "loop-" + string(policy)
			p := misbehaving(t, e, name, host.Config{Timeout: 50 * time.Millisecond, FailurePolicy: policy})
			prev := route.Decision{SetResponseHeaders: map[string][]string{"X-Prev": {"1"}}}
			start := time.Now()
			d, err := p.Route(context.Background(), request("/loop"), prev)
			took := time.Since(start)
			if err != nil {
				t.Fatal(err)
			}
			if took > 5*time.Second {
				t.Errorf("the looping call took %v; the deadline is 50ms", took)
			}
			if policy == host.FailClosed {
				if d.Action != route.Deny || d.Status != 503 || d.Body != "Service Unavailable\n" {
					t.Errorf("fail-closed decision = %+v, want a generic 503", d)
				}
			} else if d.Action != route.Forward || d.SetResponseHeaders.Get("X-Prev") != "1" || d.SetRequestHeaders != nil {
				t.Errorf("fail-open decision = %+v, want prev unchanged", d)
			}
			if got := metric(t, e, "tailplane_plugin_calls_total", map[string]string{"plugin": name, "result": "timeout"}); got != 1 {
				t.Errorf("calls_total{result=timeout} = %v, want 1", got)
			}
			if got := metric(t, e, "tailplane_plugin_instances_discarded_total", map[string]string{"plugin": name, "reason": "timeout"}); got != 1 {
				t.Errorf("discarded{reason=timeout} = %v, want 1", got)
			}
			if !strings.Contains(logs.String(), "deadline exceeded") {
				t.Errorf("logs do not say why: %s", logs.String())
			}
			servesNormally(t, p)
		})
	}
}

// A guest that allocates past its memory cap traps; the request is answered
// per policy and the next request gets a fresh instance.
func TestAllocationPastCap(t *testing.T) {
	e, logs := newEngine(t)
	p := misbehaving(t, e, "alloc", host.Config{MemoryLimit: 16 << 20, Timeout: 10 * time.Second})
	d, err := p.Route(context.Background(), request("/alloc"), route.Decision{})
	if err != nil || d.Action != route.Deny || d.Status != 503 {
		t.Fatalf("decision = %+v, %v; want 503", d, err)
	}
	if strings.Contains(d.Body, "memory") {
		t.Errorf("the client sees the error: %q", d.Body)
	}
	if got := metric(t, e, "tailplane_plugin_instances_discarded_total", map[string]string{"plugin": "alloc", "reason": "trap"}); got != 1 {
		t.Errorf("discarded{reason=trap} = %v, want 1", got)
	}
	if !strings.Contains(logs.String(), "handle_request") {
		t.Errorf("logs do not show the failure: %s", logs.String())
	}
	servesNormally(t, p)
}

// A guest that traps on every 10th call of an instance: exactly those calls
// fail, their instances are replaced, every other request is fine.
func TestTrapEveryTenthCall(t *testing.T) {
	e, _ := newEngine(t)
	p := misbehaving(t, e, "trap10", host.Config{PoolSize: 1, FailurePolicy: host.FailOpen})
	ok, failed := 0, 0
	for range 100 {
		d, err := p.Route(context.Background(), request("/trap10"), route.Decision{})
		if err != nil {
			t.Fatal(err)
		}
		if d.SetRequestHeaders.Get("X-Plugin") == "seen" {
			ok++
		} else {
			failed++
		}
	}
	if ok != 90 || failed != 10 {
		t.Errorf("%d ok, %d failed; want 90 and 10", ok, failed)
	}
	lbl := map[string]string{"plugin": "trap10"}
	if got := metric(t, e, "tailplane_plugin_instances_discarded_total", lbl); got != 10 {
		t.Errorf("discarded = %v, want 10", got)
	}
	// The last replacement is created in the background.
	testpoll.UntilTrue(t, 10*time.Second, "created_total reaches 11 (1 pre-warmed + 10 replacements)",
		func() bool { return metric(t, e, "tailplane_plugin_instances_created_total", lbl) == 11 })
	if got := metric(t, e, "tailplane_plugin_instances", lbl); got != 1 {
		t.Errorf("live instances = %v, want 1 (the pool's bound)", got)
	}
	if got := metric(t, e, "tailplane_plugin_failures_total", map[string]string{"plugin": "trap10", "policy": "open"}); got != 10 {
		t.Errorf("failures{policy=open} = %v, want 10", got)
	}
}

// set_backend only accepts the route's allowlist; a refusal is an error
// code to the guest, not a crash, and the decision keeps the default.
func TestSetBackendOutsideAllowlist(t *testing.T) {
	e, _ := newEngine(t)
	p := misbehaving(t, e, "backend", host.Config{})
	d, err := p.Route(context.Background(), request("/backend?to=evil.internal:22"), route.Decision{})
	if err != nil || d.Action != route.Forward || d.Backend != nil || d.SetRequestHeaders.Get("X-Backend-Result") != "refused" {
		t.Fatalf("outside the allowlist: %+v, %v", d, err)
	}
	if got := metric(t, e, "tailplane_plugin_refused_total", map[string]string{"plugin": "backend", "call": "set_backend"}); got != 1 {
		t.Errorf("refused{call=set_backend} = %v, want 1", got)
	}
	d, err = p.Route(context.Background(), request("/backend?to=web-canary:80"), route.Decision{})
	if err != nil || d.Backend == nil || d.Backend.Address != "10.0.0.2:80" || d.SetRequestHeaders.Get("X-Backend-Result") != "ok" {
		t.Fatalf("on the allowlist: %+v, %v", d, err)
	}
	// The refused pick kept the default (pass), the allowed one picked.
	for decision, want := range map[string]float64{"pass": 1, "backend": 1, "redirect": 0, "deny": 0} {
		if got := metric(t, e, "tailplane_plugin_decisions_total", map[string]string{"plugin": "backend", "decision": decision}); got != want {
			t.Errorf("decisions{decision=%s} = %v, want %v", decision, got, want)
		}
	}
}

// A plugin cannot widen Funnel exposure: set_funnel(allow) is refused and
// a DenyPublic set before it stays set.
func TestFunnelCannotWiden(t *testing.T) {
	e, _ := newEngine(t)
	p := misbehaving(t, e, "widen", host.Config{})
	req := request("/widen")
	d, err := p.Route(context.Background(), req, route.Decision{DenyPublic: true})
	if err != nil || !d.DenyPublic || d.SetRequestHeaders.Get("X-Widen-Result") != "refused" {
		t.Fatalf("decision = %+v, %v; want DenyPublic kept and the call refused", d, err)
	}
	pub := request("/widen")
	pub.Public, pub.Identity = true, nil
	d, err = p.Route(context.Background(), pub, route.Decision{})
	if err != nil || d.DenyPublic || d.SetRequestHeaders.Get("X-Widen-Result") != "refused" {
		t.Fatalf("public decision = %+v, %v", d, err)
	}
	if got := metric(t, e, "tailplane_plugin_refused_total", map[string]string{"plugin": "widen", "call": "set_funnel"}); got != 2 {
		t.Errorf("refused{call=set_funnel} = %v, want 2", got)
	}
}
