package pipeline

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/tailplane/tailplane/handlers/lib/proxyclassrules"
	"github.com/tailplane/tailplane/handlers/lib/proxyset"
	"github.com/tailplane/tailplane/proxy/config"
	"github.com/tailplane/tailplane/runtime"
)

// Module is what a kind of proxy parent adds to the pipeline.
type Module struct {
	// ID names the handlers: "<ID>-sync" and "<ID>-cleanup".
	ID string
	// Resource and Kind are the parent's resource and kind (messages).
	Resource schema.GroupVersionResource
	Kind     string
	// ParentType is the official parent type label of the proxy's objects
	// (proxyset.ParentService, ...). Modules may share one; Role tells
	// their proxies apart.
	ParentType string
	// Role is the role of the module's proxies (proxyset.LabelProxyRole):
	// a parent with a proxy of this role keeps the module's handlers after
	// it stopped asking for one, until its proxy is gone.
	Role string
	// NameKey, when set, replaces ParentType in the proxy's object names
	// (proxyset.Parent.NameKey); LegacyNameKey is the key an earlier
	// release named this module's proxies with: such a proxy is deleted
	// before this module creates its own.
	NameKey, LegacyNameKey string
	// ProxyKind is how a ProxyClass applies to the proxies.
	ProxyKind proxyclassrules.ProxyKind
	// ClusterScoped parents (a Connector) are handled whatever the
	// operator's watch namespace.
	ClusterScoped bool
	// IsOurs reports whether the object asks for this module's proxy.
	IsOurs runtime.Predicate
	// Tailnet, when set, names the Tailnet object whose tailnet the
	// parent's proxies join (SpecTailnet reads spec.tailnet); nil or ""
	// is the operator's own tailnet. Keys are minted, devices deleted
	// and the login server taken through that tailnet's backend.
	Tailnet func(obj *unstructured.Unstructured) string
	// Plan reads the parent and returns the proxy it wants. A nil Plan
	// and nil error leave the proxy as it is (the module reported why).
	Plan func(ctx context.Context, obj *unstructured.Unstructured) (*Plan, error)
	// Report shows an outcome on the parent: status, conditions, Events.
	Report func(ctx context.Context, obj *unstructured.Unstructured, out Outcome) error
	// Release clears what Report wrote on a parent that no longer asks for
	// a proxy, before the proxy is deleted; devices are its replicas'.
	Release func(ctx context.Context, obj *unstructured.Unstructured, devices []proxyset.Device) error
}

// Plan is the proxy a parent wants.
type Plan struct {
	// Invalid, when set, is why the parent's input is refused: the
	// outcome is Invalid and nothing is applied.
	Invalid string
	// Failed, when set, is why the cluster cannot give the parent what it
	// asks for now (no free node port, say): the outcome is Failed
	// (CausePlan), nothing is applied, and the parent is handled again
	// after FailedRetry.
	Failed string
	// Hostnames are the replicas' tailnet hostnames, one per replica: their
	// number is the number of replicas (none: a StatefulSet of zero
	// replicas, every device deleted).
	Hostnames []string
	// Tags are the tags the replicas' auth keys are minted with.
	Tags []string
	// ProxyClass is the ProxyClass's name ("" for none).
	ProxyClass string
	// Config renders replica ordinal's proxy config, without its auth key
	// and login server: Render sets both, from the parent's tailnet.
	Config func(ordinal int) (*config.Config, error)
	// ExtraSecrets are further Secrets in the operator namespace the
	// proxies may read.
	ExtraSecrets []string
	// Extra returns further objects applied with the proxy, before its
	// StatefulSet (a TLS copy, a headless Service).
	Extra func(objs *proxyset.Objects) []any
	// AfterApply runs once the proxy's objects are applied.
	AfterApply func(ctx context.Context, objs *proxyset.Objects) error
	// Check runs once every replica serves under its name: a non-empty
	// message makes the outcome Failed (CauseCheck), and the parent is
	// handled again after retry.
	Check func(ctx context.Context) (message string, retry time.Duration)
}

// Stage is how far a parent's proxy got.
type Stage int

// Stages, in order.
const (
	// Invalid: the parent's input is refused (Plan.Invalid, or a hostname
	// another parent uses).
	Invalid Stage = iota
	// Waiting: the ProxyClass is missing or not Ready, or the official
	// operator's proxy is being taken over (CauseAdoption).
	Waiting
	// Failed: the tailnet API, the API server or the proxy refused
	// something; Cause says which.
	Failed
	// Pending: applied; a replica has no device yet, or not its new name.
	Pending
	// Ready: every replica serves under its name.
	Ready
)

// Cause says why an outcome is not Ready.
type Cause int

// Causes.
const (
	CauseNone Cause = iota
	CauseInvalid
	CauseHostnameTaken
	CauseProxyClass
	CauseAuthKey
	CauseApply
	CauseConfigError
	CauseCheck
	CauseNoDevice
	CauseRenaming
	// CauseTailnet: the parent's Tailnet does not exist or is not ready.
	CauseTailnet
	// CausePlan: the module's plan cannot be met (Plan.Failed).
	CausePlan
	// CauseAdoption: the official operator's proxy of the parent is being
	// taken over, or left alone by a dry run (adopt.go).
	CauseAdoption
)

// Outcome is what the pipeline tells a module's Report.
type Outcome struct {
	Stage   Stage
	Cause   Cause
	Message string
	// Devices are the replicas' devices as their proxies reported them
	// (zero until a replica logged in), in ordinal order; set from Failed
	// with CauseConfigError on.
	Devices []proxyset.Device
	// Serving are the devices that serve under their wanted name.
	Serving []proxyset.Device
}
