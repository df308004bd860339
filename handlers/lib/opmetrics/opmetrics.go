package opmetrics

import (
	"fmt"
	"slices"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tailplane/tailplane/internal/tailnet"
)

// Metrics are the operator's metrics. Create them with New.
type Metrics struct {
	apiCalls, apiErrors *prometheus.CounterVec
	minted, revoked     prometheus.Counter
	desired, ready      *prometheus.GaugeVec
	advertising         *prometheus.GaugeVec
	failovers           *prometheus.CounterVec

	mu sync.Mutex
	// groups is what each ProxyGroup reported last.
	groups map[string]groupState
}

type groupState struct {
	desired  int
	serving  []string // device IDs of the running replicas
	services []string // Tailscale Services with an advertising series
}

// New registers the metrics on reg.
func New(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		apiCalls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tailplane_tailnet_api_calls_total",
			Help: "Calls to the tailnet's admin API (Tailscale or Headscale), by operation.",
		}, []string{"operation"}),
		apiErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tailplane_tailnet_api_errors_total",
			Help: "Failed calls to the tailnet's admin API, by operation and HTTP status code (none: no answer).",
		}, []string{"operation", "code"}),
		minted: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tailplane_auth_keys_minted_total",
			Help: "Auth keys minted for devices (proxies and the operator's own).",
		}),
		revoked: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tailplane_auth_keys_revoked_total",
			Help: "Auth keys revoked or expired (leftovers, removed replicas, orphans).",
		}),
		desired: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "tailplane_proxygroup_replicas_desired",
			Help: "Replicas a ProxyGroup asks for (spec.replicas).",
		}, []string{"proxygroup"}),
		ready: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "tailplane_proxygroup_replicas_ready",
			Help: "Replicas of a ProxyGroup whose Pod is Ready and whose device serves under its wanted name.",
		}, []string{"proxygroup"}),
		advertising: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "tailplane_proxygroup_service_advertising_replicas",
			Help: "Running replicas of a ProxyGroup that advertise a Tailscale Service, by service.",
		}, []string{"proxygroup", "service"}),
		failovers: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tailplane_proxygroup_failovers_total",
			Help: "Replicas of a ProxyGroup that stopped serving while another replica kept serving (its clients moved over); scale-downs do not count.",
		}, []string{"proxygroup"}),
		groups: map[string]groupState{},
	}
	for _, c := range []prometheus.Collector{m.apiCalls, m.apiErrors, m.minted, m.revoked, m.desired, m.ready, m.advertising, m.failovers} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register operator metrics: %w", err)
		}
	}
	return m, nil
}

// Tailnet returns b with its calls counted (tailnet.Observe); b itself
// when m is nil.
func (m *Metrics) Tailnet(b tailnet.Backend) tailnet.Backend {
	if m == nil || b == nil {
		return b
	}
	return tailnet.Observe(b, observer{m})
}

// observer is m as a tailnet.Observer.
type observer struct{ m *Metrics }

// APICall counts a call and, when it failed, the error.
func (o observer) APICall(op string, err error) {
	o.m.apiCalls.WithLabelValues(op).Inc()
	if err != nil {
		o.m.apiErrors.WithLabelValues(op, tailnet.StatusCode(err)).Inc()
	}
}

// KeysMinted counts minted keys.
func (o observer) KeysMinted(n int) { o.m.minted.Add(float64(n)) }

// KeysRevoked counts revoked or expired keys.
func (o observer) KeysRevoked(n int) { o.m.revoked.Add(float64(n)) }

// ProxyGroup is what a ProxyGroup's status was just computed from.
type ProxyGroup struct {
	// Name is the ProxyGroup's name.
	Name string
	// Desired is its spec.replicas (defaulted).
	Desired int
	// Serving are the device IDs of its running replicas.
	Serving []string
	// Advertising counts the running replicas advertising each Tailscale
	// Service the group hosts ("svc:name" -> replicas; 0 for a hosted
	// service none advertises).
	Advertising map[string]int
}

// ObserveProxyGroup records pg: its replica gauges, its services'
// advertising gauges (series of services it no longer hosts are removed),
// and a failover for each replica that stopped serving while another one
// kept serving, unless the group was scaled down.
func (m *Metrics) ObserveProxyGroup(pg ProxyGroup) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.desired.WithLabelValues(pg.Name).Set(float64(pg.Desired))
	m.ready.WithLabelValues(pg.Name).Set(float64(len(pg.Serving)))
	failovers := m.failovers.WithLabelValues(pg.Name)
	prev := m.groups[pg.Name]
	// A scale-down removes replicas on purpose: no failover.
	if len(pg.Serving) > 0 && pg.Desired >= prev.desired {
		for _, id := range prev.serving {
			if !slices.Contains(pg.Serving, id) {
				failovers.Inc()
			}
		}
	}
	services := make([]string, 0, len(pg.Advertising))
	for svc, n := range pg.Advertising {
		m.advertising.WithLabelValues(pg.Name, svc).Set(float64(n))
		services = append(services, svc)
	}
	for _, svc := range prev.services {
		if _, ok := pg.Advertising[svc]; !ok {
			m.advertising.DeleteLabelValues(pg.Name, svc)
		}
	}
	m.groups[pg.Name] = groupState{desired: pg.Desired, serving: slices.Clone(pg.Serving), services: services}
}

// ForgetProxyGroup removes the series of a deleted ProxyGroup.
func (m *Metrics) ForgetProxyGroup(name string) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.desired.DeleteLabelValues(name)
	m.ready.DeleteLabelValues(name)
	m.failovers.DeleteLabelValues(name)
	m.advertising.DeletePartialMatch(prometheus.Labels{"proxygroup": name})
	delete(m.groups, name)
}
