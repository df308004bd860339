package kit

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/tailplane/tailplane/runtime"
)

// ProxyParent describes a kind of user object served by a proxy of its own
// (an exposed Service, an egress Service, an Ingress): everything the
// handler steps of such a module share. The module supplies only what is
// particular to it, IsOurs and Sync.
type ProxyParent struct {
	// ID prefixes the handler ids: "<ID>-create", "<ID>-update", ...
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
	// Sync brings the proxy and the parent's status in line with the parent;
	// patch is nil outside a handler cycle. A parent that no longer asks for
	// a proxy is released (proxy and status removed, then WaitProxyGone)
	// only inside a handler cycle.
	Sync func(ctx context.Context, obj *unstructured.Unstructured, patch *runtime.Patch) error
}

// RegisterProxyParent adds p's handlers: create, update and resume run Sync;
// delete removes the device, the proxy's objects, then the finalizer; and a
// resync (proxy state or ProxyClass changed) runs Sync again. Objects that
// neither ask for a proxy nor have one of p's role match no handler. The
// runtime keeps its state of the parents in the operator namespace
// (ForUsersObjects): the only writes to a parent are the finalizer and
// status.
func (d *Deps) RegisterProxyParent(op *runtime.Operator, p ProxyParent) {
	ours := d.ForUsersObjects(runtime.When(runtime.Or(p.IsOurs, d.HasProxy(p.Role, p.Type))))
	handle := func(ctx context.Context, ev *runtime.Event) (any, error) {
		defer d.Lock(p.Type, ev.Object.GetNamespace(), ev.Object.GetName())()
		return nil, Retry(p.Sync(ctx, ev.Object, ev.Patch), ev.Retry)
	}
	cleanup := func(ctx context.Context, ev *runtime.Event) (any, error) {
		defer d.Lock(p.Type, ev.Object.GetNamespace(), ev.Object.GetName())()
		return nil, Retry(d.DeleteProxy(ctx, p.Type, ev.Object.GetNamespace(), ev.Object.GetName()), ev.Retry)
	}
	op.OnCreate(p.Resource, p.ID+"-create", handle, ours...)
	op.OnUpdate(p.Resource, p.ID+"-update", handle, ours...)
	op.OnResume(p.Resource, p.ID+"-resume", handle, ours...)
	op.OnDelete(p.Resource, p.ID+"-cleanup", cleanup, ours...)
	d.OnResync(p.Type, func(ctx context.Context, namespace, name string) error {
		defer d.Lock(p.Type, namespace, name)()
		obj, err := d.Dyn.Resource(p.Resource).Namespace(namespace).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read %s %s/%s: %w", p.Kind, namespace, name, err)
		}
		// A parent that stopped asking is released by its update handler:
		// the cycle that follows removes the finalizer.
		if obj.GetDeletionTimestamp() != nil || !p.IsOurs(obj) {
			return nil
		}
		return p.Sync(ctx, obj, nil)
	})
}
