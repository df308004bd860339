package ingressclass

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/tailplane/tailplane/handlers/lib/cluster"
	"github.com/tailplane/tailplane/handlers/lib/resources"
	"github.com/tailplane/tailplane/runtime"
)

// Register adds the IngressClass handlers: the served class (named by
// OPERATOR_INGRESS_CLASS_NAME) is checked on every change, with a Warning
// Event on it when it is refused, and the Ingresses of the class are handled
// again, so that they are served as soon as the class is fixed. No
// IngressClass is ever written (the operator may only read them): the
// runtime keeps its state of the served class in the operator namespace.
func Register(op *runtime.Operator, d *cluster.Deps) {
	name := d.Settings.IngressClassName
	isServed := runtime.When(func(obj *unstructured.Unstructured) bool { return obj.GetName() == name })
	store := d.StateStore()
	check := func(_ context.Context, ev *runtime.Event) (any, error) {
		var class networkingv1.IngressClass
		if err := cluster.FromUnstructured(ev.Object, &class); err != nil {
			return nil, runtime.Permanent(err)
		}
		class.APIVersion, class.Kind = "networking.k8s.io/v1", "IngressClass"
		if v := Check(&class, name); v.ClassMessage != "" {
			d.Post(&class, corev1.EventTypeWarning, v.Reason, v.ClassMessage)
		}
		d.EnqueueIndexed(cluster.IndexIngressesByClass, name, resources.Ingresses)
		return nil, nil
	}
	op.OnCreate(resources.IngressClasses, "ingressclass-create", check, isServed, store)
	op.OnUpdate(resources.IngressClasses, "ingressclass-update", check, isServed, store)
	op.OnResume(resources.IngressClasses, "ingressclass-resume", check, isServed, store)
	op.OnDelete(resources.IngressClasses, "ingressclass-users", func(_ context.Context, _ *runtime.Event) (any, error) {
		d.EnqueueIndexed(cluster.IndexIngressesByClass, name, resources.Ingresses)
		return nil, nil
	}, isServed, runtime.Optional(), store)
}
