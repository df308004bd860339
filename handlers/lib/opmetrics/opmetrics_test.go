package opmetrics_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tailplane/tailplane/handlers/lib/opmetrics"
	"github.com/tailplane/tailplane/internal/tailnet"
)

// series gathers reg: "name{l=v,...}" -> value, for the names with prefix.
func series(t *testing.T, reg *prometheus.Registry, prefix string) map[string]float64 {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, f := range fams {
		if !strings.HasPrefix(f.GetName(), prefix) {
			continue
		}
		for _, m := range f.GetMetric() {
			var ls []string
			for _, l := range m.GetLabel() {
				ls = append(ls, l.GetName()+"="+l.GetValue())
			}
			key := f.GetName() + "{" + strings.Join(ls, ",") + "}"
			if m.Counter != nil {
				out[key] = m.GetCounter().GetValue()
			} else {
				out[key] = m.GetGauge().GetValue()
			}
		}
	}
	return out
}

func check(t *testing.T, got map[string]float64, want map[string]float64) {
	t.Helper()
	for k, v := range want {
		if g, ok := got[k]; !ok || g != v {
			t.Errorf("%s = %v (present %v), want %v", k, g, ok, v)
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("unexpected series %s = %v", k, got[k])
		}
	}
}

type backend struct{ tailnet.Backend }

func (backend) MintAuthKey(context.Context, tailnet.KeyRequest) (tailnet.AuthKey, error) {
	return tailnet.AuthKey{ID: "k"}, nil
}
func (backend) RevokeAuthKey(context.Context, string) error { return nil }
func (backend) ListDevices(context.Context) ([]tailnet.Device, error) {
	return nil, &tailnet.Error{Op: "list devices", Status: http.StatusUnauthorized, Message: "bad token"}
}

func TestTailnet(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := opmetrics.New(reg)
	if err != nil {
		t.Fatal(err)
	}
	b := m.Tailnet(backend{})
	ctx := context.Background()
	_, _ = b.MintAuthKey(ctx, tailnet.KeyRequest{})
	_, _ = b.MintAuthKey(ctx, tailnet.KeyRequest{})
	_ = b.RevokeAuthKey(ctx, "k")
	_, _ = b.ListDevices(ctx)
	check(t, series(t, reg, "tailplane_"), map[string]float64{
		"tailplane_tailnet_api_calls_total{operation=mint_auth_key}":          2,
		"tailplane_tailnet_api_calls_total{operation=revoke_auth_key}":        1,
		"tailplane_tailnet_api_calls_total{operation=list_devices}":           1,
		"tailplane_tailnet_api_errors_total{code=401,operation=list_devices}": 1,
		"tailplane_auth_keys_minted_total{}":                                  2,
		"tailplane_auth_keys_revoked_total{}":                                 1,
	})
	if _, err := opmetrics.New(reg); err == nil {
		t.Error("a second New on the same registry succeeded")
	}
	var none *opmetrics.Metrics
	if got := none.Tailnet(backend{}); got != (backend{}) {
		t.Errorf("nil Metrics wrapped the backend: %T", got)
	}
	none.ObserveProxyGroup(opmetrics.ProxyGroup{Name: "x"}) // no panic
	none.ForgetProxyGroup("x")
}

func TestProxyGroup(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := opmetrics.New(reg)
	if err != nil {
		t.Fatal(err)
	}
	m.ObserveProxyGroup(opmetrics.ProxyGroup{Name: "pg", Desired: 2, Serving: []string{"a", "b"},
		Advertising: map[string]int{"svc:web": 2, "svc:api": 1}})
	check(t, series(t, reg, "tailplane_proxygroup_"), map[string]float64{
		"tailplane_proxygroup_replicas_desired{proxygroup=pg}":                             2,
		"tailplane_proxygroup_replicas_ready{proxygroup=pg}":                               2,
		"tailplane_proxygroup_failovers_total{proxygroup=pg}":                              0,
		"tailplane_proxygroup_service_advertising_replicas{proxygroup=pg,service=svc:web}": 2,
		"tailplane_proxygroup_service_advertising_replicas{proxygroup=pg,service=svc:api}": 1,
	})
	// Replica a goes away, b keeps serving: a failover; svc:api is gone.
	m.ObserveProxyGroup(opmetrics.ProxyGroup{Name: "pg", Desired: 2, Serving: []string{"b"}, Advertising: map[string]int{"svc:web": 1}})
	// a is back; then the group is scaled down to 1: no failover.
	m.ObserveProxyGroup(opmetrics.ProxyGroup{Name: "pg", Desired: 2, Serving: []string{"a", "b"}, Advertising: map[string]int{"svc:web": 2}})
	m.ObserveProxyGroup(opmetrics.ProxyGroup{Name: "pg", Desired: 1, Serving: []string{"a"}, Advertising: map[string]int{"svc:web": 1}})
	// Every replica down: an outage, not a failover.
	m.ObserveProxyGroup(opmetrics.ProxyGroup{Name: "pg", Desired: 1, Advertising: map[string]int{"svc:web": 0}})
	check(t, series(t, reg, "tailplane_proxygroup_"), map[string]float64{
		"tailplane_proxygroup_replicas_desired{proxygroup=pg}":                             1,
		"tailplane_proxygroup_replicas_ready{proxygroup=pg}":                               0,
		"tailplane_proxygroup_failovers_total{proxygroup=pg}":                              1,
		"tailplane_proxygroup_service_advertising_replicas{proxygroup=pg,service=svc:web}": 0,
	})
	m.ForgetProxyGroup("pg")
	check(t, series(t, reg, "tailplane_proxygroup_"), map[string]float64{})
}
