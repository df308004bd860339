// Package metrics holds tailplane-proxy's Prometheus metrics on a registry
// of its own (no global default registry), and serves them.
//
// It imports the Prometheus client and the standard library.
package metrics

import (
	"crypto/x509"
	"net/http"
	"strings"
	"sync/atomic"

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
	// CertificateExpiry is the expiry (Unix seconds) of the certificate the
	// proxy last obtained or loaded for each name it serves.
	CertificateExpiry *prometheus.GaugeVec
	// CertificateErrors counts failed certificate issuances and renewals by
	// name.
	CertificateErrors *prometheus.CounterVec

	// ready and online back the gauges tailplane_proxy_ready and
	// tailplane_proxy_tailnet_online (see SetState).
	ready, online atomic.Pointer[func() bool]
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
	m.CertificateExpiry = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "tailplane_proxy_certificate_expiry_timestamp_seconds",
		Help: "When the certificate the proxy serves for a name expires (Unix seconds), by name.",
	}, []string{"name"})
	m.CertificateErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tailplane_proxy_certificate_renewal_errors_total",
		Help: "Failed certificate issuances or renewals, by name.",
	}, []string{"name"})
	ready := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "tailplane_proxy_ready", Help: "1 when the proxy is ready (its readiness probe passes), else 0.",
	}, func() float64 { return bool01(m.ready.Load()) })
	online := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "tailplane_proxy_tailnet_online", Help: "1 while the proxy's device is logged in and connected to its control server, else 0.",
	}, func() float64 { return bool01(m.online.Load()) })
	reg.MustRegister(m.Requests, m.Latency, m.UpstreamErrors, m.Bytes, m.ActiveConnections, m.ConfigReloads,
		m.CertificateExpiry, m.CertificateErrors, ready, online,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// SetState sets what the gauges tailplane_proxy_ready and
// tailplane_proxy_tailnet_online report: each is asked at every scrape.
// Until it is called both report 0.
func (m *Metrics) SetState(ready, online func() bool) {
	m.ready.Store(&ready)
	m.online.Store(&online)
}

func bool01(f *func() bool) float64 {
	if f != nil && (*f)() {
		return 1
	}
	return 0
}

// CertificateObtained records the expiry of the certificate now served for
// name (a DNS name without a trailing dot), and makes its error counter
// visible at 0.
func (m *Metrics) CertificateObtained(name string, leaf *x509.Certificate) {
	if leaf == nil {
		return
	}
	name = certName(name)
	m.CertificateExpiry.WithLabelValues(name).Set(float64(leaf.NotAfter.Unix()))
	m.CertificateErrors.WithLabelValues(name)
}

// CertificateFailed counts a failed issuance or renewal of name's
// certificate.
func (m *Metrics) CertificateFailed(name string) {
	m.CertificateErrors.WithLabelValues(certName(name)).Inc()
}

func certName(name string) string { return strings.ToLower(strings.TrimSuffix(name, ".")) }

// Handler serves the registry in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{Registry: m.Registry})
}
