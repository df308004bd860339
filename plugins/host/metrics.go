package host

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tailplane/tailplane/proxy/route"
)

// Metrics are the plugin host's Prometheus collectors. They live in the
// registry the Engine is given (its own by default), never the global one.
type Metrics struct {
	calls      *prometheus.CounterVec
	decisions  *prometheus.CounterVec
	failures   *prometheus.CounterVec
	discarded  *prometheus.CounterVec
	created    *prometheus.CounterVec
	instances  *prometheus.GaugeVec
	loadErrors *prometheus.CounterVec
	refused    *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tailplane_plugin_calls_total",
			Help: "Calls into plugin guests by result: ok, trap, timeout, busy (no instance in time), invalid (bad answer).",
		}, []string{"plugin", "result"}),
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tailplane_plugin_decisions_total",
			Help: "Routing decisions of plugin guests by decision: pass (request unchanged or edited), backend (picked a backend), redirect, deny (answered itself).",
		}, []string{"plugin", "decision"}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tailplane_plugin_failures_total",
			Help: "Requests whose plugin failed, by the failure policy applied (open: skipped, closed: 503).",
		}, []string{"plugin", "policy"}),
		discarded: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tailplane_plugin_instances_discarded_total",
			Help: "Instances thrown away instead of reused, by reason (trap, timeout, closed).",
		}, []string{"plugin", "reason"}),
		created: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tailplane_plugin_instances_created_total",
			Help: "Instances created (pre-warm, growth and replacement of discarded ones).",
		}, []string{"plugin"}),
		instances: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "tailplane_plugin_instances",
			Help: "Live instances per plugin.",
		}, []string{"plugin"}),
		loadErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tailplane_plugin_load_errors_total",
			Help: "Plugins that failed to load, by reason.",
		}, []string{"plugin", "reason"}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tailplane_plugin_refused_total",
			Help: "Guest requests the host refused: set_backend outside the allowlist, set_funnel trying to widen exposure.",
		}, []string{"plugin", "call"}),
	}
	for _, c := range []prometheus.Collector{m.calls, m.decisions, m.failures, m.discarded, m.created, m.instances, m.loadErrors, m.refused} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register plugin metrics: %w", err)
		}
	}
	return m, nil
}

// pluginMetrics are one plugin's counters, curried once at load so the
// request path does no label lookups.
type pluginMetrics struct {
	ok, trap, timeout, busy, invalid prometheus.Counter
	pass, backend, redirect, deny    prometheus.Counter
	failOpen, failClosed             prometheus.Counter
	discardTrap, discardTimeout      prometheus.Counter
	created                          prometheus.Counter
	instances                        prometheus.Gauge
	refusedBackend, refusedFunnel    prometheus.Counter
}

func (m *Metrics) forPlugin(name string) *pluginMetrics {
	return &pluginMetrics{
		ok:             m.calls.WithLabelValues(name, "ok"),
		trap:           m.calls.WithLabelValues(name, "trap"),
		timeout:        m.calls.WithLabelValues(name, "timeout"),
		busy:           m.calls.WithLabelValues(name, "busy"),
		invalid:        m.calls.WithLabelValues(name, "invalid"),
		pass:           m.decisions.WithLabelValues(name, "pass"),
		backend:        m.decisions.WithLabelValues(name, "backend"),
		redirect:       m.decisions.WithLabelValues(name, "redirect"),
		deny:           m.decisions.WithLabelValues(name, "deny"),
		failOpen:       m.failures.WithLabelValues(name, "open"),
		failClosed:     m.failures.WithLabelValues(name, "closed"),
		discardTrap:    m.discarded.WithLabelValues(name, "trap"),
		discardTimeout: m.discarded.WithLabelValues(name, "timeout"),
		created:        m.created.WithLabelValues(name),
		instances:      m.instances.WithLabelValues(name),
		refusedBackend: m.refused.WithLabelValues(name, "set_backend"),
		refusedFunnel:  m.refused.WithLabelValues(name, "set_funnel"),
	}
}

// decided counts the routing decision d the guest made from prev.
func (pm *pluginMetrics) decided(prev, d route.Decision) {
	switch {
	case d.Action == route.Redirect:
		pm.redirect.Inc()
	case d.Action == route.Deny:
		pm.deny.Inc()
	case d.Backend != nil && d.Backend != prev.Backend:
		pm.backend.Inc()
	default:
		pm.pass.Inc()
	}
}
