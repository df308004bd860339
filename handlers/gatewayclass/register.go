package gatewayclass

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/tailplane/tailplane/handlers/lib/cluster"
	"github.com/tailplane/tailplane/handlers/lib/resources"
	"github.com/tailplane/tailplane/runtime"
)

// Register adds the GatewayClass handlers when the Gateway API is installed
// (its GatewayClass resource is served): a class of ours is accepted on
// every change and at every start. When it is not installed, the operator
// runs everything else and says so once; installing the Gateway API later
// needs a restart of the operator. With Settings.GatewayClassName set, the
// class of that name is created at start when it does not exist (an
// existing one is left as it is). GatewayClasses are the users' objects:
// the runtime keeps its state of them in the operator namespace, and a
// class of another controller is never written.
func Register(op *runtime.Operator, d *cluster.Deps, served map[string]bool) {
	if !served[resources.GatewayClasses.Resource] {
		return
	}
	isOurs := runtime.When(func(obj *unstructured.Unstructured) bool {
		name, _, _ := unstructured.NestedString(obj.Object, "spec", "controllerName")
		return name == string(ControllerName)
	})
	store := d.StateStore()
	accept := func(ctx context.Context, ev *runtime.Event) (any, error) { return nil, accept(ctx, d, ev.Object) }
	op.OnCreate(resources.GatewayClasses, "gatewayclass-create", accept, isOurs, store)
	op.OnUpdate(resources.GatewayClasses, "gatewayclass-update", accept, isOurs, store)
	op.OnResume(resources.GatewayClasses, "gatewayclass-resume", accept, isOurs, store)
	if name := d.Settings.GatewayClassName; name != "" {
		op.OnStartup(func(ctx context.Context) error { return ensureClass(ctx, d, name) })
	}
}

// establishWait bounds how long Served waits for the Gateway API CRDs that
// exist to be served: the chart installs them with the operator, so at its
// first start they may still be establishing.
const establishWait = 30 * time.Second

// GatewayAPIResources are the Gateway API resources the operator reads,
// each served only when its CRD is installed.
func GatewayAPIResources() []string {
	return []string{resources.GatewayClasses.Resource, resources.Gateways.Resource, resources.HTTPRoutes.Resource,
		resources.GRPCRoutes.Resource, resources.TLSRoutes.Resource, resources.TCPRoutes.Resource,
		resources.UDPRoutes.Resource, resources.ReferenceGrants.Resource}
}

// Served returns the Gateway API resources (at v1) that the API server
// serves, by resource name: those of GatewayAPIResources whose CRD exists,
// once discovery lists them (up to establishWait after their CRD was
// created). Empty when the Gateway API is not installed, which it logs
// once at info.
func Served(d *cluster.Deps) map[string]bool {
	ctx, cancel := context.WithTimeout(context.Background(), establishWait)
	defer cancel()
	gv := resources.GatewayClasses.GroupVersion().String()
	want, err := installedCRDs(ctx, d)
	served := map[string]bool{}
	if err == nil && len(want) > 0 {
		_ = wait.PollUntilContextCancel(ctx, 250*time.Millisecond, true, func(context.Context) (bool, error) {
			var list *metav1.APIResourceList
			list, err = d.Kube.Discovery().ServerResourcesForGroupVersion(gv)
			if err != nil {
				return false, nil
			}
			served = map[string]bool{}
			for _, r := range list.APIResources {
				served[r.Name] = true
			}
			for _, r := range want {
				if !served[r] {
					return false, nil
				}
			}
			return true, nil
		})
	}
	for _, r := range want {
		if !served[r] {
			d.Log.Warn("a Gateway API CRD is installed but not served; its objects are not handled until the operator restarts", "resource", r, "err", err)
		}
	}
	if served[resources.GatewayClasses.Resource] {
		return served
	}
	msg := "Gateway API is not installed (no " + gv + " GatewayClass): GatewayClasses and Gateways are not served; restart the operator after installing it"
	if err != nil && !apierrors.IsNotFound(err) {
		d.Log.Info(msg, "err", err)
	} else {
		d.Log.Info(msg)
	}
	return map[string]bool{}
}

// installedCRDs are the resources of GatewayAPIResources whose CRD exists
// (read by name: the operator may get these CRDs only).
func installedCRDs(ctx context.Context, d *cluster.Deps) ([]string, error) {
	var out []string
	for _, r := range GatewayAPIResources() {
		name := r + "." + resources.GatewayClasses.Group
		_, err := d.Dyn.Resource(resources.CustomResourceDefinitions).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("read CRD %s: %w", name, err)
		}
		out = append(out, r)
	}
	return out, nil
}

// accept writes the status of class obj of ours, when it differs.
func accept(ctx context.Context, d *cluster.Deps, obj *unstructured.Unstructured) error {
	var gc gatewayv1.GatewayClass
	if err := cluster.FromUnstructured(obj, &gc); err != nil {
		return runtime.Permanent(err)
	}
	if !IsOurs(&gc) {
		return nil
	}
	bundle, err := bundleVersion(ctx, d)
	if err != nil {
		return err
	}
	st, ok := Status(&gc, bundle)
	if !ok || !changed(obj, gc.Status, st) {
		return nil
	}
	return d.PatchStatus(ctx, resources.GatewayClasses, "", gc.Name, map[string]any{
		"conditions": st.Conditions, "supportedFeatures": st.SupportedFeatures,
	})
}

// changed reports whether want says something the class's status does not.
func changed(obj *unstructured.Unstructured, have, want gatewayv1.GatewayClassStatus) bool {
	for _, c := range want.Conditions {
		old := meta.FindStatusCondition(have.Conditions, c.Type)
		if old == nil || old.Status != c.Status || old.Reason != c.Reason || old.Message != c.Message || old.ObservedGeneration != c.ObservedGeneration {
			return true
		}
	}
	if _, present, _ := unstructured.NestedFieldNoCopy(obj.Object, "status", "supportedFeatures"); !present {
		return true
	}
	if len(have.SupportedFeatures) != len(want.SupportedFeatures) {
		return true
	}
	for i := range want.SupportedFeatures {
		if have.SupportedFeatures[i] != want.SupportedFeatures[i] {
			return true
		}
	}
	return false
}

// bundleVersion is the bundle-version annotation of the GatewayClass CRD.
func bundleVersion(ctx context.Context, d *cluster.Deps) (string, error) {
	crd, err := d.Dyn.Resource(resources.CustomResourceDefinitions).Get(ctx, CRDName, metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("read CRD %s: %w", CRDName, err)
	}
	return crd.GetAnnotations()["gateway.networking.k8s.io/bundle-version"], nil
}

// ensureClass creates GatewayClass name of ours when there is none; an
// existing class is left as it is (with another controller, it is not ours
// and the operator says so).
func ensureClass(ctx context.Context, d *cluster.Deps, name string) error {
	ri := d.Dyn.Resource(resources.GatewayClasses)
	cur, err := ri.Get(ctx, name, metav1.GetOptions{})
	if err == nil {
		if c, _, _ := unstructured.NestedString(cur.Object, "spec", "controllerName"); c != string(ControllerName) {
			d.Log.Warn("GatewayClass exists with another controller: not served", "gatewayclass", name, "controllerName", c, "want", ControllerName)
		}
		return nil
	}
	if !apierrors.IsNotFound(err) {
		return fmt.Errorf("read GatewayClass %s: %w", name, err)
	}
	_, err = ri.Create(ctx, ClassObject(name), metav1.CreateOptions{FieldManager: cluster.FieldManager})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create GatewayClass %s: %w", name, err)
	}
	if err == nil {
		d.Log.Info("created GatewayClass", "gatewayclass", name, "controllerName", ControllerName)
	}
	return nil
}
