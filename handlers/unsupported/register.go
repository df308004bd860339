package unsupported

import (
	"context"
	"reflect"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/tailplane/tailplane/handlers/lib/cluster"
	"github.com/tailplane/tailplane/handlers/lib/conditions"
	"github.com/tailplane/tailplane/runtime"
)

// Register adds, for each kind of Kinds, a handler that sets the Ready condition
// (False, NotSupported) on every object, for each new generation, and posts
// the Warning Event when the object is created or changed.
func Register(op *runtime.Operator, d *cluster.Deps) {
	for _, k := range Kinds() {
		handle := func(ctx context.Context, ev *runtime.Event) (any, error) {
			return nil, report(ctx, d, k, ev.Object, ev.Cause != runtime.CauseResume)
		}
		op.OnCreate(k.Resource, k.Resource.Resource+"-unsupported-create", handle)
		op.OnUpdate(k.Resource, k.Resource.Resource+"-unsupported-update", handle)
		op.OnResume(k.Resource, k.Resource.Resource+"-unsupported-resume", handle)
	}
}

func report(ctx context.Context, d *cluster.Deps, k Kind, obj *unstructured.Unstructured, announce bool) error {
	var have []metav1.Condition
	if raw, ok, _ := unstructured.NestedSlice(obj.Object, "status", "conditions"); ok {
		tmp := &struct {
			Conditions []metav1.Condition `json:"conditions"`
		}{}
		if err := cluster.FromUnstructured(&unstructured.Unstructured{Object: map[string]any{"conditions": raw}}, tmp); err == nil {
			have = tmp.Conditions
		}
	}
	cond := k.ReadyCondition(obj.GetGeneration())
	if announce && conditions.Changed(have, cond) {
		d.Post(obj, corev1.EventTypeWarning, ReasonNotSupported, k.Message)
	}
	conds := conditions.Set(have, cond)
	if reflect.DeepEqual(conds, have) {
		return nil
	}
	return d.PatchStatus(ctx, k.Resource, obj.GetNamespace(), obj.GetName(), map[string]any{"conditions": conds})
}
