package pipeline

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"

	"github.com/tailplane/tailplane/handlers/lib/cluster"
	"github.com/tailplane/tailplane/runtime"
)

// MemberModule is what a kind of member of a shared proxy adds to the
// pipeline: an object that gets no proxy of its own but is served by a
// group's (an Ingress or a Service of a ProxyGroup; a Gateway's routes
// next). The group's own module puts its members into its replicas'
// configs; a member's hooks make what is particular to it (a Tailscale
// Service, a cluster Service) and show it on the member. M is what Admit
// reads and Serve serves.
//
// The lifecycle is the same for every kind: an admitted member gets
// Finalizer, then is served; a member deleted, or one that stops asking to
// be a member, is released, its status cleared (only when it stays), and
// Finalizer removed. A change of a member has its group (old and new)
// handled again; a change of a group has its members handled again, all
// through the runtime's queue.
type MemberModule[M any] struct {
	// ID names the handlers: "<ID>-sync" and "<ID>-cleanup".
	ID string
	// Resource and Kind are the member's resource and kind (messages).
	Resource schema.GroupVersionResource
	Kind     string
	// Finalizer holds a served member until Release has withdrawn what
	// Serve made.
	Finalizer string
	// Index names the index of members by group (values "namespace/name").
	Index string
	// GroupResource is the resource of the groups that serve members.
	GroupResource schema.GroupVersionResource
	// IsOurs reports whether the object asks to be a member of this kind.
	IsOurs runtime.Predicate
	// Group is the cache key ("name", or "namespace/name" for a namespaced
	// group) of the group obj names, "" for none; read on members and
	// non-members alike (a member that left names the group it left).
	Group func(obj *unstructured.Unstructured) string
	// Admit reads a member and its group. ok false refuses it: Admit
	// reported why, and nothing is added, served or withdrawn.
	Admit func(ctx context.Context, obj *unstructured.Unstructured) (m M, ok bool, err error)
	// Serve makes what an admitted member needs and writes its status.
	Serve func(ctx context.Context, obj *unstructured.Unstructured, m M) error
	// Release withdraws what Serve made (the group already dropped the
	// member: it left the index).
	Release func(ctx context.Context, obj *unstructured.Unstructured) error
	// Clear removes what Serve wrote on the status of an object that
	// stopped being a member.
	Clear func(ctx context.Context, obj *unstructured.Unstructured) error
}

// Members finds the members of one kind by group.
type Members struct {
	d        *cluster.Deps
	index    string
	resource schema.GroupVersionResource
}

// Keys are the members of the group with cache key group.
func (ms *Members) Keys(group string) []runtime.Key {
	return ms.d.Indexed(ms.index, group, ms.resource)
}

// Enqueue has the group's members handled again.
func (ms *Members) Enqueue(group string) {
	ms.d.EnqueueIndexed(ms.index, group, ms.resource)
}

// RegisterMember adds m's handlers, its index and the watches that tie
// members and groups together, and returns the index's reader.
func RegisterMember[M any](p *Pipeline, op *runtime.Operator, m MemberModule[M]) *Members {
	d := p.d
	ms := &Members{d: d, index: m.Index, resource: m.Resource}
	op.Index(m.Resource, m.Index, func(obj *unstructured.Unstructured) map[string]any {
		group := m.Group(obj)
		if group == "" || !m.IsOurs(obj) || obj.GetDeletionTimestamp() != nil {
			return nil
		}
		return map[string]any{group: runtime.ObjectKey(obj.GetNamespace(), obj.GetName())}
	}, d.Scope()...)
	op.Watch(m.Resource, m.ID+"-group", func(_ watch.EventType, old, obj *unstructured.Unstructured) []runtime.Key {
		var keys []runtime.Key
		for _, o := range []*unstructured.Unstructured{old, obj} {
			if o == nil {
				continue
			}
			if ns, name, err := cache.SplitMetaNamespaceKey(m.Group(o)); err == nil && name != "" {
				keys = append(keys, runtime.Key{Resource: m.GroupResource, Namespace: ns, Name: name})
			}
		}
		return keys
	}, d.Scope()...)
	op.Watch(m.GroupResource, m.ID+"-members", func(_ watch.EventType, _, obj *unstructured.Unstructured) []runtime.Key {
		return ms.Keys(runtime.ObjectKey(obj.GetNamespace(), obj.GetName()))
	})

	hasFinalizer := func(obj *unstructured.Unstructured) bool { return slices.Contains(obj.GetFinalizers(), m.Finalizer) }
	opts := d.Scope(runtime.When(runtime.Or(m.IsOurs, hasFinalizer)), d.StateStore())
	sync := func(ctx context.Context, ev *runtime.Event) (any, error) {
		return nil, cluster.Retry(syncMember(ctx, d, &m, ev.Object), ev.Retry)
	}
	cleanup := func(ctx context.Context, ev *runtime.Event) (any, error) {
		err := m.Release(ctx, ev.Object)
		if err == nil {
			err = removeFinalizer(ctx, d, &m, ev.Object)
		}
		return nil, cluster.Retry(err, ev.Retry)
	}
	op.On(m.Resource, m.ID+"-sync", sync, append(opts,
		runtime.Causes(runtime.CauseCreate, runtime.CauseUpdate, runtime.CauseResume, runtime.CauseEnqueue))...)
	op.OnDelete(m.Resource, m.ID+"-cleanup", cleanup, opts...)
	return ms
}

// syncMember serves an admitted member, or releases one that left.
func syncMember[M any](ctx context.Context, d *cluster.Deps, m *MemberModule[M], obj *unstructured.Unstructured) error {
	if !m.IsOurs(obj) {
		if err := m.Release(ctx, obj); err != nil {
			return err
		}
		if err := m.Clear(ctx, obj); err != nil {
			return err
		}
		return removeFinalizer(ctx, d, m, obj)
	}
	member, ok, err := m.Admit(ctx, obj)
	if err != nil || !ok {
		return err
	}
	if !slices.Contains(obj.GetFinalizers(), m.Finalizer) {
		if err := setFinalizers(ctx, d, m, obj, append(slices.Clone(obj.GetFinalizers()), m.Finalizer)); err != nil {
			return err
		}
	}
	return m.Serve(ctx, obj, member)
}

// removeFinalizer reads the member again: obj may predate a finalizer
// added by another handler since.
func removeFinalizer[M any](ctx context.Context, d *cluster.Deps, m *MemberModule[M], obj *unstructured.Unstructured) error {
	cur, err := d.Dyn.Resource(m.Resource).Namespace(obj.GetNamespace()).Get(ctx, obj.GetName(), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read %s %s/%s: %w", m.Kind, obj.GetNamespace(), obj.GetName(), err)
	}
	if !slices.Contains(cur.GetFinalizers(), m.Finalizer) {
		return nil
	}
	return setFinalizers(ctx, d, m, cur, slices.DeleteFunc(slices.Clone(cur.GetFinalizers()), func(f string) bool { return f == m.Finalizer }))
}

// setFinalizers writes the list guarded by the resourceVersion read, so
// that a finalizer added meanwhile by someone else is never dropped.
func setFinalizers[M any](ctx context.Context, d *cluster.Deps, m *MemberModule[M], obj *unstructured.Unstructured, list []string) error {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"finalizers": list, "resourceVersion": obj.GetResourceVersion()}})
	if err != nil {
		return err
	}
	_, err = d.Dyn.Resource(m.Resource).Namespace(obj.GetNamespace()).Patch(ctx, obj.GetName(), types.MergePatchType, patch, metav1.PatchOptions{})
	if apierrors.IsConflict(err) {
		return runtime.Temporary(fmt.Errorf("%s %s/%s changed while its finalizers were updated: %w", m.Kind, obj.GetNamespace(), obj.GetName(), err), 0)
	}
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("update finalizers of %s %s/%s: %w", m.Kind, obj.GetNamespace(), obj.GetName(), err)
	}
	return nil
}
