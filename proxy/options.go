package proxy

import (
	"context"
	"time"

	"github.com/charmbracelet/log"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"tailscale.com/ipn"

	"github.com/tailplane/tailplane/internal/kubestate"
	"github.com/tailplane/tailplane/internal/proxystate"
	"github.com/tailplane/tailplane/proxy/config"
	"github.com/tailplane/tailplane/proxy/configwatch"
	"github.com/tailplane/tailplane/proxy/metrics"
	"github.com/tailplane/tailplane/proxy/route"
)

// StatusWriter records device info and config refusals where the operator
// reads them (the state Secret). *kubestate.Store implements it.
type StatusWriter interface {
	SetDeviceInfo(ctx context.Context, d kubestate.DeviceInfo) error
	// SetConfigError records why the config was refused ("" clears it,
	// as SetConfigServing("") does).
	SetConfigError(ctx context.Context, msg string) error
	// SetConfigServing records that this process serves its config, all
	// of it (problem "") or all but what problem names (config_error).
	SetConfigServing(ctx context.Context, problem string) error
	// SetServices records how an ingress-group replica hosts each of its
	// Tailscale Services (proxystate.KeyServices).
	SetServices(ctx context.Context, report map[string]proxystate.ServiceReport) error
}

// PeerMemory keeps, across the device's processes, the tailnet peers it
// had WireGuard sessions with recently (the state Secret's recent_peers).
// *kubestate.Store implements it.
type PeerMemory interface {
	// RecentPeers returns the addresses recorded last, possibly by the
	// previous process.
	RecentPeers() []string
	// SetRecentPeers records the addresses (sorted) when they changed.
	SetRecentPeers(ctx context.Context, peers []string) error
}

// Options configure an Engine. Source, State, StateDir and Logger are required.
type Options struct {
	// Source delivers the config document (a Secret or a file).
	Source configwatch.Source
	// State holds tailscaled's state (node key, profile); a restarted proxy
	// with the same state comes back as the same device.
	State ipn.StateStore
	// StateDir is tsnet's working folder (log config, no secrets).
	StateDir string
	// Status receives device info and config errors; nil only logs them.
	Status StatusWriter
	// Peers, when set, is where the engine records its recent peers while
	// it runs and when it stops, and where a new process finds them: it
	// pings them before it reports ready, so that they learn its new disco
	// key and path at once (peers.go). Nil neither records nor primes.
	Peers PeerMemory
	// PeerRecordInterval is how often the recent peers are read and, when
	// they changed, recorded; default 10 s. A process that is killed
	// leaves what it recorded last.
	PeerRecordInterval time.Duration
	// NoPriming turns the pings at start off (recording stays on), for
	// measurements of what they save.
	NoPriming bool
	// Kube and Namespace are used to read TLS Secrets (tls.mode secret and
	// shared) and to write the shared certificate this replica issues.
	Kube      kubernetes.Interface
	Namespace string

	// LocalAddr serves /healthz and /metrics, e.g. "$POD_IP:9002".
	LocalAddr string
	// EgressHost is the address egress listeners bind to (the pod IP).
	EgressHost string
	// PublicAddr, when set, is where Funnel traffic is served instead of
	// tsnet's ListenFunnel (for control servers without Funnel). Requests
	// arriving there are marked public, exactly like Funnel ones.
	PublicAddr string
	// DrainTimeout bounds the graceful drain after the context ends.
	DrainTimeout time.Duration
	// TLSRefreshInterval is how often a kubernetes.io/tls Secret in use is
	// re-read, so renewed certificates are served without a config change.
	// Default one minute.
	TLSRefreshInterval time.Duration

	// ExtraRouters run after the routing table, in order, on every L7
	// request (e.g. the WASM plugin host). Each sees the previous decision.
	ExtraRouters []route.Router
	// PluginRouters, when set, is called on every L7 config apply with the
	// config's plugins list and returns routers run after ExtraRouters. An
	// error refuses the config (the previous one keeps serving).
	PluginRouters func(ctx context.Context, plugins []config.Plugin) ([]route.Router, error)

	// IssueCert obtains the certificate for a Tailscale Service's MagicDNS
	// name (TLS mode shared, on the issuing replica). Nil uses the node:
	// ACME through the control server, once control lists the name among
	// the node's certificate domains. Tests replace it where the control
	// server cannot issue certificates.
	IssueCert func(ctx context.Context, domain string) (certPEM, keyPEM []byte, err error)

	// APIServerUpstream is the API server the kube-apiserver role forwards
	// to, with the proxy's own credentials; nil uses the in-cluster config
	// (KUBERNETES_SERVICE_HOST/PORT and the pod's ServiceAccount token).
	APIServerUpstream *rest.Config

	// Logger receives all logs. Metrics may be nil (a fresh registry is used).
	Logger  *log.Logger
	Metrics *metrics.Metrics
	// TsnetDebug shows tsnet's internal log at debug level
	// (TAILPLANE_TSNET_LOG_LEVEL); it is hidden otherwise, whatever
	// Logger's level.
	TsnetDebug bool
	// Ephemeral registers the node as ephemeral (tests and benchmarks).
	Ephemeral bool
}
