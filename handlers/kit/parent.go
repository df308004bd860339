package kit

import (
	"context"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/tailplane/tailplane/runtime"
)

// ProxyParent describes a kind of user object served by a proxy of its own
// (an exposed Service, an egress Service, an Ingress): everything the
// handler steps of such a module share. The module supplies only what is
// particular to it, IsOurs and Sync.
type ProxyParent struct {
	// ID names the handlers: "<ID>-sync" and "<ID>-cleanup".
	ID string
	// Type is the proxyset parent type (proxyset.ParentService, ...).
	Type string
	// Resource and Kind are the parent's resource and, for messages, kind.
	Resource schema.GroupVersionResource
	Kind     string
	// Role is the role of the module's proxies (RoleIngressL4, ...): a
	// parent with a proxy of this role keeps the module's handlers after it
	// stopped asking for one, until Sync released it.
	Role string
	// IsOurs reports whether the object asks for this module's proxy.
	IsOurs runtime.Predicate
	// Sync brings the proxy and the parent's status in line with the
	// parent; patch is the runtime cycle's patch of the parent.
	Sync func(ctx context.Context, obj *unstructured.Unstructured, patch *runtime.Patch) error
}

// RegisterProxyParent adds p's handlers: one for create, update, resume and
// enqueue (the parent's proxy state, ProxyClass, IngressClass or backends
// changed; see EnqueueParent and WatchProxyState) runs Sync; delete removes
// the device, the proxy's objects, then the finalizer. Objects that neither
// ask for a proxy nor have a proxy of p's role match no handler.
func (d *Deps) RegisterProxyParent(op *runtime.Operator, p ProxyParent) {
	ours := d.ForUsersObjects(runtime.When(runtime.Or(p.IsOurs, d.HasProxy(p.Role, p.Type))))
	handle := func(ctx context.Context, ev *runtime.Event) (any, error) {
		return nil, Retry(d.syncLegacy(ctx, p, ev), ev.Retry)
	}
	cleanup := func(ctx context.Context, ev *runtime.Event) (any, error) {
		return nil, Retry(d.DeleteProxy(ctx, p.Type, ev.Object.GetNamespace(), ev.Object.GetName()), ev.Retry)
	}
	op.On(p.Resource, p.ID+"-sync", handle, append(ours,
		runtime.Causes(runtime.CauseCreate, runtime.CauseUpdate, runtime.CauseResume, runtime.CauseEnqueue))...)
	op.OnDelete(p.Resource, p.ID+"-cleanup", cleanup, ours...)
}
