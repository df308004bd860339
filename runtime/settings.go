package runtime

import (
	"io"
	"os"
	"time"

	"github.com/charmbracelet/log"
	"k8s.io/utils/clock"
)

// Settings tune an Operator. The zero value of every field means "use the
// default" named in its comment; New fills them in.
type Settings struct {
	// Workers is how many keys are handled at once (default 4). One key is
	// never on two workers at once.
	Workers int
	// Prefix names the annotations the runtime keeps on handled objects: the
	// last-handled record (<prefix>/last-handled) and per-handler progress
	// (<prefix>/<handler id>) (default "runtime.tailplane.io").
	Prefix string
	// Finalizer is added to objects that need one (default
	// "<Prefix>/finalizer").
	Finalizer string
	// Storage keeps the last-handled record and handler progress of the
	// resources that do not choose their own with the Store option
	// (default: AnnotationStorage with Prefix).
	Storage Storage
	// ResultsPath is where handler results go: <ResultsPath>.<handler id>
	// (default "status").
	ResultsPath string
	// FieldManager is the server-side apply field manager (default "tailplane").
	FieldManager string
	// Component is the reporting component of posted Events (default "tailplane").
	Component string
	// QuietSuccess posts Events only for failures and retries, not for
	// every handler success. Each Event is an API write (and client-go's
	// correlator computes a patch for it), so busy operators may want this.
	QuietSuccess bool

	// MinBackoff and MaxBackoff bound the exponential backoff of handlers that
	// fail with an error that is neither Temporary nor Permanent
	// (defaults 1s and 5m). The same bounds drive the workqueue's per-key
	// rate limiter for the runtime's own failures (API errors).
	MinBackoff, MaxBackoff time.Duration
	// Clock tells the time of the runtime's own delays: the workqueue's
	// delayed and rate-limited keys, handler retry delays (backoff and
	// Temporary), Timeout, Enqueue delays, Every's period, timers, Idle and
	// ConsistencyTimeout (default: the real clock). Tests step a fake one
	// (k8s.io/utils/clock/testing). Leader election, watch health checks and
	// shutdown bounds keep real time: they wait on the API server.
	Clock clock.WithTicker
	// ConsistencyTimeout is how long a key waits for the informer to deliver
	// the runtime's own patch before it is handled anyway (default 5s).
	ConsistencyTimeout time.Duration

	// ResyncPeriod re-delivers every cached object (default 0: never).
	ResyncPeriod time.Duration
	// WatchCheckInterval is how often each watch is checked for health
	// (default 1m; negative disables the check).
	WatchCheckInterval time.Duration
	// WatchStallTimeout is how long a watch may lag behind the server before
	// it is restarted (default 3m: longer than the apiserver's 1m bookmarks).
	WatchStallTimeout time.Duration

	// ShutdownTimeout bounds a graceful shutdown: in-flight handlers get this
	// long to finish before their context is cancelled, and cleanup hooks the
	// same again (default 10s).
	ShutdownTimeout time.Duration
	// DaemonStopTimeout bounds how long a deleted object's daemons may take
	// to return before its finalizer is removed anyway (default 10s).
	DaemonStopTimeout time.Duration

	// HealthAddress serves /healthz and /readyz (default ":8081"; "-" disables).
	HealthAddress string
	// MetricsAddress serves Prometheus /metrics (default ":8080"; "-"
	// disables). When equal to HealthAddress, one server serves all three.
	MetricsAddress string

	// LeaderElection, when set, makes only one replica active at a time.
	LeaderElection *LeaderElection

	// Logger receives all log lines (default: text on stderr, see NewLogger).
	Logger *log.Logger
}

// LeaderElection configures the Lease that elects the active replica.
type LeaderElection struct {
	// Namespace and Name locate the Lease (both required).
	Namespace, Name string
	// Identity names this replica (default: the host name).
	Identity string
	// LeaseDuration, RenewDeadline and RetryPeriod follow client-go's
	// leaderelection (defaults 15s, 10s, 2s).
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
}

// NewLogger returns a charmbracelet logger writing text, or JSON when json is
// true, to w.
func NewLogger(w io.Writer, json bool) *log.Logger {
	opts := log.Options{ReportTimestamp: true, TimeFormat: time.RFC3339Nano}
	if json {
		opts.Formatter = log.JSONFormatter
	}
	return log.NewWithOptions(w, opts)
}

func (s Settings) withDefaults() Settings {
	def := func(v *time.Duration, d time.Duration) {
		if *v == 0 {
			*v = d
		}
	}
	str := func(v *string, d string) {
		if *v == "" {
			*v = d
		}
	}
	if s.Workers <= 0 {
		s.Workers = 4
	}
	str(&s.Prefix, "runtime.tailplane.io")
	str(&s.Finalizer, s.Prefix+"/finalizer")
	if s.Storage == nil {
		s.Storage = &AnnotationStorage{}
	}
	if a, ok := s.Storage.(*AnnotationStorage); ok && a.Prefix == "" {
		a.Prefix = s.Prefix
	}
	str(&s.ResultsPath, "status")
	str(&s.FieldManager, "tailplane")
	str(&s.Component, "tailplane")
	def(&s.MinBackoff, time.Second)
	def(&s.MaxBackoff, 5*time.Minute)
	def(&s.ConsistencyTimeout, 5*time.Second)
	def(&s.WatchCheckInterval, time.Minute)
	def(&s.WatchStallTimeout, 3*time.Minute)
	def(&s.ShutdownTimeout, 10*time.Second)
	def(&s.DaemonStopTimeout, 10*time.Second)
	str(&s.HealthAddress, ":8081")
	str(&s.MetricsAddress, ":8080")
	if s.Logger == nil {
		s.Logger = NewLogger(os.Stderr, false)
	}
	if s.Clock == nil {
		s.Clock = clock.RealClock{}
	}
	if le := s.LeaderElection; le != nil {
		c := *le
		def(&c.LeaseDuration, 15*time.Second)
		def(&c.RenewDeadline, 10*time.Second)
		def(&c.RetryPeriod, 2*time.Second)
		if c.Identity == "" {
			c.Identity, _ = os.Hostname()
		}
		s.LeaderElection = &c
	}
	return s
}

// until is how long from the Clock's now until t.
func (o *Operator) until(t time.Time) time.Duration { return t.Sub(o.settings.Clock.Now()) }
