package manifests_test

import (
	"context"
	"os"
	"reflect"
	"slices"
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
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/yaml"

	"github.com/tailplane/tailplane/crds"
	"github.com/tailplane/tailplane/crds/tailscale/v1alpha1"
	"github.com/tailplane/tailplane/deploy/manifests"
	"github.com/tailplane/tailplane/handlers/egress"
	"github.com/tailplane/tailplane/handlers/proxyclass"
	"github.com/tailplane/tailplane/handlers/service"
	"github.com/tailplane/tailplane/handlers/settings"
	"github.com/tailplane/tailplane/internal/testenv"
)

var env = testenv.New()

func TestMain(m *testing.M) { os.Exit(env.Run(m)) }

const fieldManager = "tailplane"

func objects(t *testing.T) []*unstructured.Unstructured {
	t.Helper()
	objs, err := manifests.Objects()
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

// 01-crds.yaml must be exactly the CRDs of crds/ (refresh it with
// `go tool task manifests:crds`).
func TestCRDCopyMatchesCRDsFolder(t *testing.T) {
	want, err := crds.Objects()
	if err != nil {
		t.Fatal(err)
	}
	var got []*unstructured.Unstructured
	for _, o := range objects(t) {
		if o.GetKind() == "CustomResourceDefinition" {
			got = append(got, o)
		}
	}
	if len(got) != len(want) {
		t.Fatalf("deploy/manifests has %d CRDs, crds/ has %d: run go tool task manifests:crds", len(got), len(want))
	}
	for i := range want {
		if !reflect.DeepEqual(got[i].Object, want[i].Object) {
			t.Errorf("CRD %s differs from crds/: run go tool task manifests:crds", want[i].GetName())
		}
	}
}

// apply server-side-applies every object, in order, waiting for CRDs to be
// established before objects that may need them.
func apply(t *testing.T, ctx context.Context, cfg *rest.Config, objs []*unstructured.Unstructured) {
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
		if _, err := client.Apply(ctx, o.GetName(), o, metav1.ApplyOptions{FieldManager: fieldManager, Force: true}); err != nil {
			t.Fatalf("%s %s/%s was refused: %v", gvk.Kind, o.GetNamespace(), o.GetName(), err)
		}
	}
}

// The manifests are accepted by a real apiserver with server-side apply, and
// applying them again changes nothing.
func TestManifestsApply(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cfg := env.Config(t)
	apply(t, ctx, cfg, objects(t))

	cs := kubernetes.NewForConfigOrDie(cfg)
	dep, err := cs.AppsV1().Deployments("tailscale").Get(ctx, "operator", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range dep.Spec.Template.Spec.Containers[0].Env {
		names = append(names, e.Name)
	}
	for _, want := range []string{settings.EnvNamespace, settings.EnvClientIDFile, settings.EnvClientSecretFile, settings.EnvProxyImage,
		settings.EnvProxyTags, settings.EnvIngressClassName, settings.EnvLoginServer, settings.EnvDefaultProxyClass, settings.EnvDefaultLoadBalancer} {
		if !slices.Contains(names, want) {
			t.Errorf("operator Deployment lacks env %s", want)
		}
	}
	if dep.Spec.Template.Spec.ServiceAccountName != "operator" {
		t.Errorf("service account %q", dep.Spec.Template.Spec.ServiceAccountName)
	}
	class, err := cs.NetworkingV1().IngressClasses().Get(ctx, "tailscale", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if class.Spec.Controller != "tailscale.com/ts-ingress" || class.Annotations["ingressclass.kubernetes.io/is-default-class"] != "" {
		t.Errorf("IngressClass %+v", class)
	}
	if _, err := cs.CoreV1().Secrets("tailscale").Get(ctx, "operator-oauth", metav1.GetOptions{}); err != nil {
		t.Error(err)
	}

	before := dep.ResourceVersion
	apply(t, ctx, cfg, objects(t))
	again, err := cs.AppsV1().Deployments("tailscale").Get(ctx, "operator", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if again.ResourceVersion != before {
		t.Errorf("applying the same manifests again changed the Deployment")
	}
}

// asOperator returns a config that acts as the operator's ServiceAccount.
func asOperator(t *testing.T) *rest.Config {
	cfg := env.Config(t)
	cfg.Impersonate = rest.ImpersonationConfig{
		UserName: "system:serviceaccount:tailscale:operator",
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:tailscale", "system:authenticated"},
	}
	return cfg
}

// serviceMonitorCRD is the test stand-in for the Prometheus Operator's CRD.
func serviceMonitorCRD(t *testing.T) *unstructured.Unstructured {
	t.Helper()
	b, err := os.ReadFile("testdata/servicemonitor-crd.yaml")
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(b, &u.Object); err != nil {
		t.Fatal(err)
	}
	return u
}

func toUnstructured(t *testing.T, o any) *unstructured.Unstructured {
	t.Helper()
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
	if err != nil {
		t.Fatal(err)
	}
	delete(m, "status")
	return &unstructured.Unstructured{Object: m}
}

// The RBAC is enough for what the operator does (create a proxy's objects,
// including a Role it grants, and write a Service's status) and no more
// (no Secrets or workloads outside its namespace).
func TestOperatorRBAC(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	apply(t, ctx, env.Config(t), append(objects(t), serviceMonitorCRD(t)))

	admin := env.Clientset(t)
	ns := env.Namespace(t)
	class := service.LoadBalancerClass
	svc, err := admin.CoreV1().Services(ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "postgres"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, LoadBalancerClass: &class,
			Ports: []corev1.ServicePort{{Port: 5432}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	opts := settings.Settings{Namespace: "tailscale", ProxyImage: "ghcr.io/tailplane/tailplane-proxy:test", ProxyTags: []string{"tag:k8s"}}
	objs, err := service.Render(svc, opts, "", "tskey-auth-test")
	if err != nil {
		t.Fatal(err)
	}
	// With a ProxyClass applied, including an env var that replaces one of
	// the operator's (server-side apply refuses duplicate names).
	objs.StatefulSet = proxyclass.Apply(objs.StatefulSet, &v1alpha1.ProxyClass{Spec: v1alpha1.ProxyClassSpec{
		Metrics: &v1alpha1.Metrics{Enable: true},
		StatefulSet: &v1alpha1.StatefulSet{Labels: v1alpha1.Labels{"team": "net"}, Pod: &v1alpha1.Pod{
			Tolerations:        []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpExists}},
			TailscaleContainer: &v1alpha1.Container{Env: []v1alpha1.Env{{Name: "TS_KUBE_SECRET", Value: "x"}, {Name: "EXTRA", Value: "1"}}},
		}},
	}}, proxyclass.L4)
	var rendered []*unstructured.Unstructured
	for _, o := range objs.List() {
		rendered = append(rendered, toUnstructured(t, o))
	}
	operator := asOperator(t)
	apply(t, ctx, operator, rendered)
	// metrics.enable: the metrics Service, and the ServiceMonitor it owns.
	metricsSvc := proxyclass.MetricsService(objs.StatefulSet)
	apply(t, ctx, operator, []*unstructured.Unstructured{toUnstructured(t, metricsSvc)})
	liveMetrics, err := admin.CoreV1().Services("tailscale").Get(ctx, metricsSvc.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	apply(t, ctx, operator, []*unstructured.Unstructured{proxyclass.ServiceMonitor(liveMetrics, &v1alpha1.ProxyClass{Spec: v1alpha1.ProxyClassSpec{
		Metrics: &v1alpha1.Metrics{Enable: true, ServiceMonitor: &v1alpha1.ServiceMonitor{Enable: true, Labels: v1alpha1.Labels{"release": "prometheus"}}},
	}})})

	op := kubernetes.NewForConfigOrDie(operator)
	svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{Hostname: "default-postgres.tail1.ts.net"}, {IP: "100.64.0.1"}}
	if _, err := op.CoreV1().Services(ns).UpdateStatus(ctx, svc, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("operator cannot write Service status: %v", err)
	}
	if _, err := op.CoreV1().Events(ns).Create(ctx, &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{GenerateName: "postgres."},
		InvolvedObject: corev1.ObjectReference{Kind: "Service", Namespace: ns, Name: "postgres", UID: svc.UID},
		Type:           corev1.EventTypeNormal, Reason: "ProxyCreated", Message: "test",
	}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("operator cannot post Events: %v", err)
	}

	dyn := dynamic.NewForConfigOrDie(operator)
	// An egress proxy's headless Service, in the operator namespace.
	eg, err := egress.Render(&corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: ns, UID: "uid-db", Annotations: map[string]string{"tailscale.com/tailnet-ip": "100.64.0.5"}},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 5432}}},
	}, opts, "", "")
	if err != nil {
		t.Fatal(err)
	}
	apply(t, ctx, operator, []*unstructured.Unstructured{toUnstructured(t, eg.HeadlessService)})

	forbidden := []struct {
		what string
		err  func() error
	}{
		{"read Secrets outside its namespace", func() error {
			_, err := op.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{})
			return err
		}},
		{"create StatefulSets outside its namespace", func() error {
			sts := toUnstructured(t, objs.StatefulSet)
			sts.SetNamespace(ns)
			_, err := dyn.Resource(schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "statefulsets"}).Namespace(ns).
				Apply(ctx, sts.GetName(), sts, metav1.ApplyOptions{FieldManager: fieldManager})
			return err
		}},
		{"delete Services", func() error {
			return op.CoreV1().Services(ns).Delete(ctx, "postgres", metav1.DeleteOptions{})
		}},
	}
	for _, f := range forbidden {
		if err := f.err(); !apierrors.IsForbidden(err) {
			t.Errorf("operator can %s (err %v)", f.what, err)
		}
	}
	checkProxyRBAC(t, ctx, objs.Names.Base, objs.Names.ConfigSecret, objs.Names.StateSecret)
}

// The proxy's ServiceAccount reaches its own two Secrets (get, watch by name,
// patch) and nothing else.
func checkProxyRBAC(t *testing.T, ctx context.Context, sa, configSecret, stateSecret string) {
	t.Helper()
	cfg := env.Config(t)
	cfg.Impersonate = rest.ImpersonationConfig{
		UserName: "system:serviceaccount:tailscale:" + sa,
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:tailscale", "system:authenticated"},
	}
	proxy := kubernetes.NewForConfigOrDie(cfg).CoreV1().Secrets("tailscale")
	if _, err := proxy.Get(ctx, configSecret, metav1.GetOptions{}); err != nil {
		t.Errorf("proxy cannot read its config: %v", err)
	}
	w, err := proxy.Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + configSecret})
	if err != nil {
		t.Errorf("proxy cannot watch its config: %v", err)
	} else {
		w.Stop()
	}
	patch := []byte(`{"data":{"device_id":"bjE="}}`)
	if _, err := proxy.Patch(ctx, stateSecret, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Errorf("proxy cannot write its state: %v", err)
	}
	if _, err := proxy.Get(ctx, "operator-oauth", metav1.GetOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("proxy can read the operator's OAuth Secret (err %v)", err)
	}
	if _, err := proxy.List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("proxy can list Secrets (err %v)", err)
	}
}
