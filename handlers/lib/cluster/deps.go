package cluster

import (
	"time"

	"github.com/charmbracelet/log"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/tailplane/tailplane/handlers/lib/device"
	"github.com/tailplane/tailplane/handlers/lib/opmetrics"
	"github.com/tailplane/tailplane/handlers/lib/settings"
	"github.com/tailplane/tailplane/internal/tailnet"
	"github.com/tailplane/tailplane/runtime"
)

// LabelHostname is put on config Secrets so that a tailnet hostname already
// claimed by another parent is found with one list call (device.Claims).
const LabelHostname = device.LabelHostname

// FieldManager is the server-side apply field manager of every child.
const FieldManager = "tailplane"

// Deps is what every module's Register gets.
type Deps struct {
	// Settings are the operator's settings.
	Settings settings.Settings
	// Backend is the admin API of the operator's own tailnet.
	Backend tailnet.Backend
	// Tailnets are the backends of the tailnets that parents may join
	// through spec.tailnet (Tailnet objects), "" being Backend; the
	// Tailnet module keeps it up to date.
	Tailnets *tailnet.Registry
	// Metrics are the operator's own metrics (ProxyGroups, the tailnet
	// API); nil records nothing.
	Metrics *opmetrics.Metrics
	// Op is the runtime the modules register on.
	Op *runtime.Operator
	// Kube and Dyn are clients of the cluster.
	Kube kubernetes.Interface
	Dyn  dynamic.Interface
	// ClusterDomain is the cluster's DNS domain (egress ExternalNames).
	ClusterDomain string
	// Log is the operator's logger.
	Log *log.Logger
	// WatchNamespace, when set, limits the handled Services, Ingresses and
	// their backends to one namespace (tests, single-tenant installs);
	// empty means every namespace.
	WatchNamespace string
	// OperatorNodeID is the stable node ID of the operator's own tailnet
	// device (what Tailscale Services' owner references name). The operator
	// sets it at startup, before any handler runs; it is empty when the
	// operator runs without a device (tests).
	OperatorNodeID string
	// Resolver checks that the names ExternalName proxies forward to
	// resolve (default net.DefaultResolver); ResolveRetry is how often a
	// name that did not is looked up again (default DefaultResolveRetry).
	Resolver     Resolver
	ResolveRetry time.Duration
	// CertRefresh is how often the copy of an Ingress's own TLS Secret is
	// compared with the user's Secret (renewed by cert-manager, say); the
	// operator may read user Secrets by name but not watch them. Default
	// DefaultCertRefresh; set it before Register.
	CertRefresh time.Duration
	// OrphanKeySweep is how often the operator's tailnet, when its keys
	// carry no description (Headscale: tailnet.KeySweeper), is searched
	// for keys no proxy's Secret holds; OrphanKeyGrace is how old such a
	// key must be, so that one being written into its config right now is
	// spared. Defaults DefaultOrphanKeySweep and DefaultOrphanKeyGrace;
	// set them before Register.
	OrphanKeySweep, OrphanKeyGrace time.Duration
	// StrayProxySweep is how often the operator looks for proxies whose
	// parent left the API server without their delete handler (its
	// finalizer removed by hand or by another operator) and removes them.
	// Default DefaultStrayProxySweep; set it before Register.
	StrayProxySweep time.Duration
	// SharedServiceCheck is how often the Tailscale Services of
	// ProxyGroup members are read for operators of other clusters that
	// began or stopped serving them too (nothing in this cluster changes
	// then). Default DefaultSharedServiceCheck; set it before Register.
	SharedServiceCheck time.Duration
	// RouteApprovalGrace is how long a Connector's routes may stay
	// unapproved before it warns (RoutesNotApproved): a policy's
	// autoApprovers approve them a moment after they are advertised.
	// Default DefaultRouteApprovalGrace; set it before Register.
	RouteApprovalGrace time.Duration
	// ApplyRefresh is how long an identical server-side apply of a child
	// is skipped outright; after it, the live child is read and the apply
	// sent only if the child no longer holds what was applied. Zero means
	// a minute, a negative value no skipping without a look; set it before
	// Register.
	ApplyRefresh time.Duration

	stateStore *runtime.ConfigMapStorage
	applied    appliedCache
}

// DefaultCertRefresh is the default of Deps.CertRefresh.
const DefaultCertRefresh = time.Minute

// Defaults of Deps.OrphanKeySweep and Deps.OrphanKeyGrace. A key is
// written into its config Secret within a handler cycle of being minted
// (seconds), so five minutes spares every key in hand-over.
const (
	DefaultOrphanKeySweep = 10 * time.Minute
	DefaultOrphanKeyGrace = 5 * time.Minute
)

// DefaultStrayProxySweep is the default of Deps.StrayProxySweep: a sweep
// costs a list of the state Secrets and a read of each parent.
const DefaultStrayProxySweep = 5 * time.Minute

// DefaultSharedServiceCheck is the default of Deps.SharedServiceCheck: one
// list of each tailnet's Tailscale Services per member kind.
const DefaultSharedServiceCheck = 30 * time.Second

// DefaultRouteApprovalGrace is the default of Deps.RouteApprovalGrace:
// control approves within seconds of the advertisement.
const DefaultRouteApprovalGrace = 30 * time.Second

// NewDeps returns Deps for the modules registered on op.
func NewDeps(op *runtime.Operator, kube kubernetes.Interface, dyn dynamic.Interface, backend tailnet.Backend, s settings.Settings, logger *log.Logger) *Deps {
	d := &Deps{Settings: s, Backend: backend, Tailnets: tailnet.NewRegistry(backend), Op: op, Kube: kube, Dyn: dyn, ClusterDomain: "cluster.local", Log: logger,
		CertRefresh: DefaultCertRefresh, ResolveRetry: DefaultResolveRetry,
		OrphanKeySweep: DefaultOrphanKeySweep, OrphanKeyGrace: DefaultOrphanKeyGrace, StrayProxySweep: DefaultStrayProxySweep,
		RouteApprovalGrace: DefaultRouteApprovalGrace, SharedServiceCheck: DefaultSharedServiceCheck}
	// The state goes with the release: helm uninstall leaves no ConfigMap.
	d.stateStore = &runtime.ConfigMapStorage{Namespace: s.Namespace, Name: StateStorageName, Prefix: "tailplane.dev",
		Legacy: LegacyStatePrefix, Owner: d.OperatorOwner}
	return d
}

// Scope returns opts plus the watch-namespace option of parents.
func (d *Deps) Scope(opts ...runtime.Option) []runtime.Option {
	if d.WatchNamespace != "" {
		opts = append(opts, runtime.Namespace(d.WatchNamespace))
	}
	return opts
}
