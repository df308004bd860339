// Package rbaccheck holds the least-privilege checks of the operator's and
// the proxies' RBAC, run by the tests of deploy/manifests (objects applied
// with kubectl's server-side apply) and deploy/chart (objects installed with
// Helm) against a real kube-apiserver: the operator can do what it does and
// no more.
//
// It imports the handlers' plans and pipeline.Render (to create exactly
// what the operator creates), client-go and testing.
package rbaccheck

import (
	"context"
	"os"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/yaml"

	"github.com/tailplane/tailplane/crds/tailscale/v1alpha1"
	"github.com/tailplane/tailplane/handlers/egress"
	"github.com/tailplane/tailplane/handlers/gatewayclass"
	"github.com/tailplane/tailplane/handlers/lib/pipeline"
	"github.com/tailplane/tailplane/handlers/lib/proxyclassrules"
	"github.com/tailplane/tailplane/handlers/lib/resources"
	"github.com/tailplane/tailplane/handlers/lib/settings"
	"github.com/tailplane/tailplane/handlers/service"
	"github.com/tailplane/tailplane/internal/testenv"
)

// FieldManager is the field manager of the objects Apply writes.
const FieldManager = "tailplane"

// Apply server-side-applies every object, in order, waiting for CRDs to be
// established before objects that may need them.
func Apply(t testing.TB, ctx context.Context, cfg *rest.Config, objs []*unstructured.Unstructured) {
	t.Helper()
	dyn := dynamic.NewForConfigOrDie(cfg)
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(discovery.NewDiscoveryClientForConfigOrDie(cfg)))
	var crdObjs []*unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == "CustomResourceDefinition" {
			crdObjs = append(crdObjs, o)
		}
	}
	established := false
	for _, o := range objs {
		if o.GetKind() != "CustomResourceDefinition" && !established && len(crdObjs) > 0 {
			// InstallCRDs only waits here: the CRDs were applied above.
			if err := testenv.InstallCRDs(ctx, dyn, crdObjs...); err != nil {
				t.Fatal(err)
			}
			mapper.Reset()
			established = true
		}
		gvk := o.GroupVersionKind()
		m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			t.Fatalf("%s %s: %v", gvk.Kind, o.GetName(), err)
		}
		var client dynamic.ResourceInterface = dyn.Resource(m.Resource)
		if m.Scope.Name() == meta.RESTScopeNameNamespace {
			client = dyn.Resource(m.Resource).Namespace(o.GetNamespace())
		}
		if _, err := client.Apply(ctx, o.GetName(), o, metav1.ApplyOptions{FieldManager: FieldManager, Force: true}); err != nil {
			t.Fatalf("%s %s/%s was refused: %v", gvk.Kind, o.GetNamespace(), o.GetName(), err)
		}
	}
}

// ServiceMonitorCRD reads the test stand-in for the Prometheus Operator's
// CRD (deploy/manifests/testdata/servicemonitor-crd.yaml) from path.
func ServiceMonitorCRD(t testing.TB, path string) *unstructured.Unstructured {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(b, &u.Object); err != nil {
		t.Fatal(err)
	}
	return u
}

// As returns a config of admin that acts as ServiceAccount sa of namespace.
func As(admin *rest.Config, namespace, sa string) *rest.Config {
	cfg := rest.CopyConfig(admin)
	cfg.Impersonate = rest.ImpersonationConfig{
		UserName: "system:serviceaccount:" + namespace + ":" + sa,
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"},
	}
	return cfg
}

func toUnstructured(t testing.TB, o any) *unstructured.Unstructured {
	t.Helper()
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
	if err != nil {
		t.Fatal(err)
	}
	delete(m, "status")
	return &unstructured.Unstructured{Object: m}
}

// Operator checks that ServiceAccount operator of operatorNS (with the
// ServiceMonitor CRD installed) can do what the operator does for a Service
// of userNS (create a proxy's objects, including a Role it grants, metrics
// Service and ServiceMonitor, write the Service's status, post Events) and
// no more (no Secrets or workloads outside its namespace, no deleting
// users' Services); then checks the proxy's own RBAC.
func Operator(t *testing.T, ctx context.Context, admin *rest.Config, operatorNS, userNS string) {
	t.Helper()
	adminCS := kubernetes.NewForConfigOrDie(admin)
	class := service.LoadBalancerClass
	svc, err := adminCS.CoreV1().Services(userNS).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "postgres"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, LoadBalancerClass: &class,
			Ports: []corev1.ServicePort{{Port: 5432}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	opts := settings.Settings{Namespace: operatorNS, ProxyImage: "ghcr.io/tailplane/tailplane-proxy:test", ProxyTags: []string{"tag:k8s"}}
	objs, err := pipeline.Render(service.Parent(svc), opts, service.Plan(svc, opts), pipeline.Login{Keys: []string{"tskey-auth-test"}})
	if err != nil {
		t.Fatal(err)
	}
	// With a ProxyClass applied, including an env var that replaces one of
	// the operator's (server-side apply refuses duplicate names).
	objs.StatefulSet = proxyclassrules.Apply(objs.StatefulSet, &v1alpha1.ProxyClass{Spec: v1alpha1.ProxyClassSpec{
		Metrics: &v1alpha1.Metrics{Enable: true},
		StatefulSet: &v1alpha1.StatefulSet{Labels: v1alpha1.Labels{"team": "net"}, Pod: &v1alpha1.Pod{
			Tolerations:        []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpExists}},
			TailscaleContainer: &v1alpha1.Container{Env: []v1alpha1.Env{{Name: "TS_KUBE_SECRET", Value: "x"}, {Name: "EXTRA", Value: "1"}}},
		}},
	}}, proxyclassrules.L4)
	var rendered []*unstructured.Unstructured
	for _, o := range objs.List() {
		rendered = append(rendered, toUnstructured(t, o))
	}
	operator := As(admin, operatorNS, "operator")
	Apply(t, ctx, operator, rendered)
	// metrics.enable: the metrics Service, and the ServiceMonitor it owns.
	metricsSvc := proxyclassrules.MetricsService(objs.StatefulSet)
	Apply(t, ctx, operator, []*unstructured.Unstructured{toUnstructured(t, metricsSvc)})
	liveMetrics, err := adminCS.CoreV1().Services(operatorNS).Get(ctx, metricsSvc.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	Apply(t, ctx, operator, []*unstructured.Unstructured{proxyclassrules.ServiceMonitor(liveMetrics, &v1alpha1.ProxyClass{Spec: v1alpha1.ProxyClassSpec{
		Metrics: &v1alpha1.Metrics{Enable: true, ServiceMonitor: &v1alpha1.ServiceMonitor{Enable: true, Labels: v1alpha1.Labels{"release": "prometheus"}}},
	}})})

	op := kubernetes.NewForConfigOrDie(operator)
	svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{Hostname: "default-postgres.tail1.ts.net"}, {IP: "100.64.0.1"}}
	if _, err := op.CoreV1().Services(userNS).UpdateStatus(ctx, svc, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("operator cannot write Service status: %v", err)
	}
	if _, err := op.CoreV1().Events(userNS).Create(ctx, &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{GenerateName: "postgres."},
		InvolvedObject: corev1.ObjectReference{Kind: "Service", Namespace: userNS, Name: "postgres", UID: svc.UID},
		Type:           corev1.EventTypeNormal, Reason: "ProxyCreated", Message: "test",
	}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("operator cannot post Events: %v", err)
	}

	dyn := dynamic.NewForConfigOrDie(operator)
	// An egress proxy's headless Service, in the operator namespace.
	db := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: userNS, UID: "uid-db", Annotations: map[string]string{"tailscale.com/tailnet-ip": "100.64.0.5"}},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 5432}}},
	}
	eg, err := pipeline.Render(egress.Parent(db), opts, egress.Plan(db, opts), pipeline.Login{})
	if err != nil {
		t.Fatal(err)
	}
	Apply(t, ctx, operator, []*unstructured.Unstructured{toUnstructured(t, eg.Extra[0])})

	gatewayClasses(t, ctx, admin, dyn)

	forbidden := []struct {
		what string
		err  func() error
	}{
		{"read Secrets outside its namespace", func() error {
			_, err := op.CoreV1().Secrets(userNS).List(ctx, metav1.ListOptions{})
			return err
		}},
		{"create StatefulSets outside its namespace", func() error {
			sts := toUnstructured(t, objs.StatefulSet)
			sts.SetNamespace(userNS)
			_, err := dyn.Resource(schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "statefulsets"}).Namespace(userNS).
				Apply(ctx, sts.GetName(), sts, metav1.ApplyOptions{FieldManager: FieldManager})
			return err
		}},
		{"delete Services", func() error {
			return op.CoreV1().Services(userNS).Delete(ctx, "postgres", metav1.DeleteOptions{})
		}},
		{"change a GatewayClass's spec", func() error {
			_, err := dyn.Resource(resources.GatewayClasses).Patch(ctx, gatewayClassName, types.MergePatchType,
				[]byte(`{"spec":{"description":"x"}}`), metav1.PatchOptions{})
			return err
		}},
		{"delete GatewayClasses", func() error {
			return dyn.Resource(resources.GatewayClasses).Delete(ctx, gatewayClassName, metav1.DeleteOptions{})
		}},
		{"read a Gateway API CRD of a kind it does not serve", func() error {
			_, err := dyn.Resource(resources.CustomResourceDefinitions).Get(ctx, "listenersets.gateway.networking.k8s.io", metav1.GetOptions{})
			return err
		}},
	}
	for _, f := range forbidden {
		if err := f.err(); !apierrors.IsForbidden(err) {
			t.Errorf("operator can %s (err %v)", f.what, err)
		}
	}
	proxy(t, ctx, admin, operatorNS, objs.Names.Base, objs.Names.ConfigSecret, objs.Names.StateSecret)
}

// gatewayClassName is the GatewayClass the checks create.
const gatewayClassName = "rbaccheck"

// gatewayClasses checks, with the Gateway API installed (the chart's CRDs,
// waited for here), that the operator (client dyn) creates its GatewayClass,
// writes its status and reads the GatewayClass CRD's version.
func gatewayClasses(t *testing.T, ctx context.Context, admin *rest.Config, dyn dynamic.Interface) {
	t.Helper()
	adminDyn := dynamic.NewForConfigOrDie(admin)
	_ = adminDyn.Resource(resources.GatewayClasses).Delete(ctx, gatewayClassName, metav1.DeleteOptions{})
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := dyn.Resource(resources.GatewayClasses).Create(ctx, gatewayclass.ClassObject(gatewayClassName), metav1.CreateOptions{})
		// NotFound while the CRD is not established yet; AlreadyExists
		// while the deleted one goes.
		return err == nil, ignore(err, apierrors.IsNotFound, apierrors.IsAlreadyExists)
	})
	if err != nil {
		t.Fatalf("operator cannot create its GatewayClass: %v", err)
	}
	t.Cleanup(func() {
		_ = adminDyn.Resource(resources.GatewayClasses).Delete(context.Background(), gatewayClassName, metav1.DeleteOptions{})
	})
	if _, err := dyn.Resource(resources.GatewayClasses).Patch(ctx, gatewayClassName, types.MergePatchType,
		[]byte(`{"status":{"supportedFeatures":[]}}`), metav1.PatchOptions{}, "status"); err != nil {
		t.Errorf("operator cannot write a GatewayClass's status: %v", err)
	}
	if _, err := dyn.Resource(resources.GatewayClasses).List(ctx, metav1.ListOptions{}); err != nil {
		t.Errorf("operator cannot list GatewayClasses: %v", err)
	}
	for _, r := range gatewayclass.GatewayAPIResources() {
		name := r + "." + resources.GatewayClasses.Group
		if _, err := dyn.Resource(resources.CustomResourceDefinitions).Get(ctx, name, metav1.GetOptions{}); err != nil {
			t.Errorf("operator cannot read the CRD %s: %v", name, err)
		}
	}
	// Gateways and routes: read them, write their status; a Gateway's
	// finalizer; namespaces for allowedRoutes selectors.
	for _, res := range []schema.GroupVersionResource{resources.Gateways, resources.HTTPRoutes, resources.GRPCRoutes,
		resources.TLSRoutes, resources.TCPRoutes, resources.UDPRoutes, resources.ReferenceGrants, resources.Namespaces} {
		if _, err := dyn.Resource(res).List(ctx, metav1.ListOptions{}); err != nil {
			t.Errorf("operator cannot list %s: %v", res.Resource, err)
		}
	}
	for _, res := range []schema.GroupVersionResource{resources.Gateways, resources.HTTPRoutes, resources.GRPCRoutes,
		resources.TLSRoutes, resources.TCPRoutes, resources.UDPRoutes} {
		_, err := dyn.Resource(res).Namespace("default").Patch(ctx, "absent", types.MergePatchType, []byte(`{"status":{}}`), metav1.PatchOptions{}, "status")
		if !apierrors.IsNotFound(err) {
			t.Errorf("operator cannot write the status of %s (err %v, want NotFound)", res.Resource, err)
		}
	}
}

// ignore returns nil when err is nil or one of the kinds, else err.
func ignore(err error, kinds ...func(error) bool) error {
	for _, k := range kinds {
		if k(err) {
			return nil
		}
	}
	return err
}

// proxy checks that the proxy's ServiceAccount reaches its own two Secrets
// (get, watch by name, patch) and nothing else.
func proxy(t *testing.T, ctx context.Context, admin *rest.Config, namespace, sa, configSecret, stateSecret string) {
	t.Helper()
	secrets := kubernetes.NewForConfigOrDie(As(admin, namespace, sa)).CoreV1().Secrets(namespace)
	if _, err := secrets.Get(ctx, configSecret, metav1.GetOptions{}); err != nil {
		t.Errorf("proxy cannot read its config: %v", err)
	}
	w, err := secrets.Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + configSecret})
	if err != nil {
		t.Errorf("proxy cannot watch its config: %v", err)
	} else {
		w.Stop()
	}
	patch := []byte(`{"data":{"device_id":"bjE="}}`)
	if _, err := secrets.Patch(ctx, stateSecret, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Errorf("proxy cannot write its state: %v", err)
	}
	if _, err := secrets.Get(ctx, "operator-oauth", metav1.GetOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("proxy can read the operator's OAuth Secret (err %v)", err)
	}
	if _, err := secrets.List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("proxy can list Secrets (err %v)", err)
	}
}
