package kit

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/charmbracelet/log"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/tailplane/tailplane/handlers/settings"
	"github.com/tailplane/tailplane/internal/tailnet"
	"github.com/tailplane/tailplane/runtime"
)

// Resources the modules watch or write.
var (
	Services        = schema.GroupVersionResource{Version: "v1", Resource: "services"}
	Secrets         = schema.GroupVersionResource{Version: "v1", Resource: "secrets"}
	ServiceAccounts = schema.GroupVersionResource{Version: "v1", Resource: "serviceaccounts"}
	StatefulSets    = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "statefulsets"}
	Roles           = schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "roles"}
	RoleBindings    = schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "rolebindings"}
	Ingresses       = schema.GroupVersionResource{Group: "networking.k8s.io", Version: "v1", Resource: "ingresses"}
	IngressClasses  = schema.GroupVersionResource{Group: "networking.k8s.io", Version: "v1", Resource: "ingressclasses"}
	ProxyClasses    = schema.GroupVersionResource{Group: "tailscale.com", Version: "v1alpha1", Resource: "proxyclasses"}
	RoutingPlugins  = schema.GroupVersionResource{Group: "tailplane.dev", Version: "v1alpha1", Resource: "routingplugins"}
)

// LabelHostname is put on config Secrets so that a tailnet hostname already
// claimed by another parent is found with one list call.
const LabelHostname = "tailplane.dev/hostname"

// FieldManager is the server-side apply field manager of every child.
const FieldManager = "tailplane"

// Deps is what every module's Register gets.
type Deps struct {
	// Settings are the operator's settings.
	Settings settings.Settings
	// Backend is the tailnet's admin API.
	Backend tailnet.Backend
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

	mu         sync.Mutex
	stateStore *runtime.ConfigMapStorage
	resync     *resyncQueue
	syncers    map[string][]SyncFunc
	locks      keyedLocks
	claimLock  sync.Mutex
	applied    appliedCache
	stateMu    sync.Mutex
	lastState  map[string]string   // state Secret -> fingerprint of its device keys
	claims     map[string]string   // hostname -> parent key
	claimed    map[string]string   // parent key -> hostname
	waiters    map[string][]string // hostname -> parents refused it
}

// DefaultCertRefresh is the default of Deps.CertRefresh.
const DefaultCertRefresh = time.Minute

// SyncFunc re-handles one parent, identified by namespace and name, from its
// current state in the cluster (a parent that is gone or being deleted is
// left to its delete handler).
type SyncFunc func(ctx context.Context, namespace, name string) error

// NewDeps returns Deps and registers the resync queue's startup hook on op.
func NewDeps(op *runtime.Operator, kube kubernetes.Interface, dyn dynamic.Interface, backend tailnet.Backend, s settings.Settings, logger *log.Logger) *Deps {
	d := &Deps{Settings: s, Backend: backend, Op: op, Kube: kube, Dyn: dyn, ClusterDomain: "cluster.local", Log: logger,
		CertRefresh: DefaultCertRefresh, ResolveRetry: DefaultResolveRetry, syncers: map[string][]SyncFunc{},
		stateStore: &runtime.ConfigMapStorage{Namespace: s.Namespace, Name: StateStorageName, Prefix: "tailplane.dev"}}
	d.resync = newResyncQueue(d)
	op.OnStartup(func(ctx context.Context) error {
		d.resync.start(ctx)
		return nil
	})
	return d
}

// OnResync adds a sync function for a parent type (e.g. "svc", "ingress");
// Resync calls every function of the type, in registration order, through
// the queue. Each must leave alone parents that are not its own.
func (d *Deps) OnResync(parentType string, fn SyncFunc) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.syncers[parentType] = append(d.syncers[parentType], fn)
}

// Resync queues parent (type, namespace, name) to be handled again. Keys are
// deduplicated and never handled by two workers at once; failures are
// retried with backoff.
func (d *Deps) Resync(parentType, namespace, name string) {
	d.resync.add(fmt.Sprintf("%s/%s/%s", parentType, namespace, name))
}

func (d *Deps) syncer(parentType string) []SyncFunc {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.syncers[parentType]
}

// Scope returns opts plus the watch-namespace option of parents.
func (d *Deps) Scope(opts ...runtime.Option) []runtime.Option {
	if d.WatchNamespace != "" {
		opts = append(opts, runtime.Namespace(d.WatchNamespace))
	}
	return opts
}

// Lock serializes the handling of one parent between the runtime's workers
// (its own handlers) and the resync queue; call the returned func to unlock.
func (d *Deps) Lock(parentType, namespace, name string) func() {
	return d.locks.lock(parentType + "/" + namespace + "/" + name)
}
