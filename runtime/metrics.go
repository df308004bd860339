package runtime

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// metrics live in the Operator's own registry: no global state, so several
// Operators (and tests) never collide.
type metrics struct {
	registry        *prometheus.Registry
	handlerDuration *prometheus.HistogramVec
	handlerOutcomes *prometheus.CounterVec
	retries         *prometheus.CounterVec
	patches         *prometheus.CounterVec
	watchRestarts   *prometheus.CounterVec
	enqueued        *prometheus.CounterVec
}

func newMetrics(o *Operator) *metrics {
	m := &metrics{
		registry: prometheus.NewRegistry(),
		handlerDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "runtime_handler_duration_seconds",
			Help:    "Time spent in handler functions.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 4, 10),
		}, []string{"resource", "handler"}),
		handlerOutcomes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "runtime_handler_outcomes_total",
			Help: "Handler runs by outcome: success, temporary, error, permanent, interrupted.",
		}, []string{"resource", "handler", "outcome"}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "runtime_handler_retries_total",
			Help: "Handler attempts scheduled again after a failure.",
		}, []string{"resource", "handler"}),
		patches: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "runtime_patches_total",
			Help: "Patches of handled objects by result: ok, conflict, gone, error.",
		}, []string{"resource", "result"}),
		watchRestarts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "runtime_watch_restarts_total",
			Help: "Watches restarted because they stopped delivering.",
		}, []string{"resource"}),
		enqueued: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "runtime_enqueued_total",
			Help: "Objects queued again by Enqueue or a Watch mapping.",
		}, []string{"resource"}),
	}
	depth := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "runtime_queue_depth",
		Help: "Keys waiting in the workqueue.",
	}, func() float64 { return float64(o.queue.Len()) })
	m.registry.MustRegister(m.handlerDuration, m.handlerOutcomes, m.retries, m.patches, m.watchRestarts, m.enqueued, depth,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Registry returns the Operator's Prometheus registry, for adding metrics of
// one's own to /metrics.
func (o *Operator) Registry() *prometheus.Registry { return o.metrics.registry }
