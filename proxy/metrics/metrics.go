// Package metrics holds tailplane-proxy's Prometheus metrics on a registry
// of its own (no global default registry), and serves them.
//
// It imports the Prometheus client and the standard library.
package metrics

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Metrics is every metric the proxy exports.
type Metrics struct {
	Registry *prometheus.Registry
	// Requests counts L7 requests by route ("<host><path>" or "none") and code.
	Requests *prometheus.CounterVec
	// Latency is the L7 request duration by route.
	Latency *prometheus.HistogramVec
	// UpstreamErrors counts failed backend round trips or dials by backend.
	UpstreamErrors *prometheus.CounterVec
	// Bytes counts bytes by direction ("in" from clients, "out" to clients)
	// and layer ("l7", "l4", "egress").
	Bytes *prometheus.CounterVec
	// ActiveConnections gauges open client connections by layer.
	ActiveConnections *prometheus.GaugeVec
	// ConfigReloads counts config applications by result ("applied", "refused").
	ConfigReloads *prometheus.CounterVec
}

// New registers the metrics on a fresh registry (plus Go and process
// collectors).
func New() *Metrics {
	reg := prometheus.NewRegistry()
	m := &Metrics{
		Registry: reg,
		Requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tailplane_proxy_requests_total", Help: "L7 requests by route and status code.",
		}, []string{"route", "code"}),
		Latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "tailplane_proxy_request_duration_seconds", Help: "L7 request latency until the response headers are written, by route.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2.5, 12),
		}, []string{"route"}),
		UpstreamErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tailplane_proxy_upstream_errors_total", Help: "Failed dials or round trips to backends, by backend.",
		}, []string{"backend"}),
		Bytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tailplane_proxy_bytes_total", Help: "Bytes relayed, by layer and direction (in: from clients, out: to clients).",
		}, []string{"layer", "direction"}),
		ActiveConnections: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "tailplane_proxy_active_connections", Help: "Open client connections (or UDP flows) by layer.",
		}, []string{"layer"}),
		ConfigReloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tailplane_proxy_config_reloads_total", Help: "Config documents seen, by result (applied or refused).",
		}, []string{"result"}),
	}
	reg.MustRegister(m.Requests, m.Latency, m.UpstreamErrors, m.Bytes, m.ActiveConnections, m.ConfigReloads,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Handler serves the registry in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{Registry: m.Registry})
}
