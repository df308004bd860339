package runtime

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/utils/ptr"
)

// Apply creates or updates a child object with server-side apply under the
// Operator's field manager (Settings.FieldManager), taking ownership of the
// fields it sets (force). It makes child handling idempotent.
func (o *Operator) Apply(ctx context.Context, gvr schema.GroupVersionResource, obj *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	return Apply(ctx, o.dyn, gvr, obj, o.settings.FieldManager)
}

// Apply is server-side apply of obj under fieldManager, which must be set:
// the manager owns the applied fields, so a name the caller did not choose
// would take them over from the caller's other writes.
func Apply(ctx context.Context, dyn dynamic.Interface, gvr schema.GroupVersionResource, obj *unstructured.Unstructured, fieldManager string) (*unstructured.Unstructured, error) {
	if fieldManager == "" {
		return nil, fmt.Errorf("apply %s %s/%s: no field manager", gvr.Resource, obj.GetNamespace(), obj.GetName())
	}
	obj = obj.DeepCopy()
	obj.SetManagedFields(nil)
	obj.SetResourceVersion("")
	out, err := dyn.Resource(gvr).Namespace(obj.GetNamespace()).Apply(ctx, obj.GetName(), obj,
		metav1.ApplyOptions{FieldManager: fieldManager, Force: true})
	if err != nil {
		return nil, fmt.Errorf("apply %s %s/%s: %w", gvr.Resource, obj.GetNamespace(), obj.GetName(), err)
	}
	return out, nil
}

// Dynamic returns the Operator's dynamic client.
func (o *Operator) Dynamic() dynamic.Interface { return o.dyn }

// OwnerReference builds a controller owner reference to owner (which must
// carry apiVersion, kind, name and uid).
func OwnerReference(owner *unstructured.Unstructured) metav1.OwnerReference {
	return metav1.OwnerReference{
		APIVersion:         owner.GetAPIVersion(),
		Kind:               owner.GetKind(),
		Name:               owner.GetName(),
		UID:                owner.GetUID(),
		Controller:         ptr.To(true),
		BlockOwnerDeletion: ptr.To(true),
	}
}

// Adopt makes owner the controller of each child: it appends (or replaces)
// the owner reference, puts the child in the owner's namespace when it has
// none, and sets the given labels. Children that already have another
// controller are left alone and reported in the error.
func Adopt(owner *unstructured.Unstructured, labels map[string]string, children ...*unstructured.Unstructured) error {
	ref := OwnerReference(owner)
	var refused []string
	for _, child := range children {
		refs := child.GetOwnerReferences()
		kept := refs[:0:0]
		other := false
		for _, r := range refs {
			if r.UID == ref.UID {
				continue
			}
			if r.Controller != nil && *r.Controller {
				other = true
			}
			kept = append(kept, r)
		}
		if other {
			refused = append(refused, child.GetName())
			continue
		}
		child.SetOwnerReferences(append(kept, ref))
		if child.GetNamespace() == "" && owner.GetNamespace() != "" {
			child.SetNamespace(owner.GetNamespace())
		}
		SetLabels(labels, child)
	}
	if len(refused) > 0 {
		return fmt.Errorf("adopt by %s %s: already controlled by another owner: %v", owner.GetKind(), owner.GetName(), refused)
	}
	return nil
}

// SetLabels merges labels into each object's labels.
func SetLabels(labels map[string]string, objs ...*unstructured.Unstructured) {
	if len(labels) == 0 {
		return
	}
	for _, obj := range objs {
		l := obj.GetLabels()
		if l == nil {
			l = map[string]string{}
		}
		for k, v := range labels {
			l[k] = v
		}
		obj.SetLabels(l)
	}
}

// RemoveOwnerReference drops owner's reference from each object.
func RemoveOwnerReference(owner *unstructured.Unstructured, objs ...*unstructured.Unstructured) {
	for _, obj := range objs {
		refs := obj.GetOwnerReferences()
		kept := refs[:0:0]
		for _, r := range refs {
			if r.UID != owner.GetUID() {
				kept = append(kept, r)
			}
		}
		obj.SetOwnerReferences(kept)
	}
}
