package cluster

import (
	"context"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/tailplane/tailplane/runtime"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// PatchStatus merge-patches the status subresource of a namespaced or
// cluster-scoped object (namespace "" for cluster-scoped). An object that
// is gone has no status to show: that is no error.
func (d *Deps) PatchStatus(ctx context.Context, gvr schema.GroupVersionResource, namespace, name string, status map[string]any) error {
	b, err := json.Marshal(map[string]any{"status": status})
	if err != nil {
		return fmt.Errorf("encode status of %s/%s: %w", namespace, name, err)
	}
	ri := d.Dyn.Resource(gvr).Namespace(namespace)
	if _, err := ri.Patch(ctx, name, types.MergePatchType, b, metav1.PatchOptions{}, "status"); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("patch status of %s %s/%s: %w", gvr.Resource, namespace, name, err)
	}
	return nil
}

// Post records an Event about a typed or unstructured object of any kind
// (TypeMeta set: the Event's involvedObject needs apiVersion and kind). A
// Warning goes through runtime.Operator.PostOnce: one that an earlier run
// of the operator posted already is not posted again at the start, so a
// restart does not repeat every problem it finds again.
func (d *Deps) Post(obj any, eventType, reason, message string) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		m, err := kruntime.DefaultUnstructuredConverter.ToUnstructured(obj)
		if err != nil {
			d.Log.Warn("cannot post Event", "reason", reason, "err", fmt.Errorf("convert %T: %w", obj, err))
			return
		}
		u = &unstructured.Unstructured{Object: m}
	}
	if u.GetKind() == "" || u.GetAPIVersion() == "" {
		d.Log.Warn("cannot post Event: object has no apiVersion and kind", "reason", reason, "object", u.GetNamespace()+"/"+u.GetName())
		return
	}
	if eventType == corev1.EventTypeWarning {
		d.Op.PostOnce(u, eventType, reason, message)
		return
	}
	d.Op.Post(u, eventType, reason, message)
}

// FromUnstructured decodes u into the typed object out.
func FromUnstructured(u *unstructured.Unstructured, out any) error {
	if err := kruntime.DefaultUnstructuredConverter.FromUnstructured(u.Object, out); err != nil {
		return fmt.Errorf("decode %s %s/%s: %w", u.GetKind(), u.GetNamespace(), u.GetName(), err)
	}
	return nil
}

// DecodeService decodes a Service with its TypeMeta set (an Event's
// involvedObject needs it); an object that does not decode is a Permanent
// error.
func DecodeService(obj *unstructured.Unstructured) (*corev1.Service, error) {
	var svc corev1.Service
	if err := FromUnstructured(obj, &svc); err != nil {
		return nil, runtime.Permanent(err)
	}
	svc.APIVersion, svc.Kind = "v1", "Service"
	return &svc, nil
}

// OrNil is v for a merge patch of a status field, or nil (which the merge
// patch turns into a deletion of the field) when empty: an empty list left
// behind would differ from the official operator's status.
func OrNil(empty bool, v any) any {
	if empty {
		return nil
	}
	return v
}
