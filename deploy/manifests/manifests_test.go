package manifests_test

import (
	"context"
	"io/fs"
	"os"
	"reflect"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"

	"github.com/tailplane/tailplane/crds"
	"github.com/tailplane/tailplane/deploy/chart"
	"github.com/tailplane/tailplane/deploy/internal/rbaccheck"
	"github.com/tailplane/tailplane/deploy/manifests"
	"github.com/tailplane/tailplane/handlers/lib/settings"
	"github.com/tailplane/tailplane/internal/testenv"
)

var env = testenv.New()

func TestMain(m *testing.M) { os.Exit(env.Run(m)) }

func objects(t *testing.T) []*unstructured.Unstructured {
	t.Helper()
	objs, err := manifests.Objects()
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

// 01-crds.yaml must be exactly the CRDs of crds/ (refresh it with
// `go tool task manifests:crds`); the Gateway API's are in
// 01-gateway-api-crds.yaml.
func TestCRDCopyMatchesCRDsFolder(t *testing.T) {
	want, err := crds.Objects()
	if err != nil {
		t.Fatal(err)
	}
	var got []*unstructured.Unstructured
	for _, o := range objects(t) {
		group, _, _ := unstructured.NestedString(o.Object, "spec", "group")
		if o.GetKind() == "CustomResourceDefinition" && group != "gateway.networking.k8s.io" {
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

// The files here are exactly the chart rendered with its default values (the
// chart is their one source): refresh them with `go tool task
// manifests:render`.
func TestManifestsMatchChart(t *testing.T) {
	want, err := chart.PlainManifests(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	got, err := fs.Glob(manifests.Files(), "*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range got {
		if _, ok := want[name]; !ok {
			t.Errorf("deploy/manifests/%s is not rendered from the chart: remove it or add it to the chart", name)
		}
	}
	for name, b := range want {
		have, err := fs.ReadFile(manifests.Files(), name)
		if err != nil || string(have) != string(b) {
			t.Errorf("deploy/manifests/%s is out of date with deploy/chart: run go tool task manifests:render", name)
		}
	}
}

// The manifests are accepted by a real apiserver with server-side apply, and
// applying them again changes nothing.
func TestManifestsApply(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cfg := env.Config(t)
	rbaccheck.Apply(t, ctx, cfg, objects(t))

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
		settings.EnvProxyTags, settings.EnvIngressClassName, settings.EnvLoginServer, settings.EnvDefaultProxyClass, settings.EnvDefaultLoadBalancer,
		"OPERATOR_HOSTNAME", "OPERATOR_INITIAL_TAGS", "OPERATOR_SECRET"} {
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
	rbaccheck.Apply(t, ctx, cfg, objects(t))
	again, err := cs.AppsV1().Deployments("tailscale").Get(ctx, "operator", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if again.ResourceVersion != before {
		t.Errorf("applying the same manifests again changed the Deployment")
	}
}

// The RBAC is enough for what the operator does (create a proxy's objects,
// including a Role it grants, and write a Service's status) and no more
// (no Secrets or workloads outside its namespace).
func TestOperatorRBAC(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	admin := env.Config(t)
	rbaccheck.Apply(t, ctx, admin, append(objects(t), rbaccheck.ServiceMonitorCRD(t, "testdata/servicemonitor-crd.yaml")))
	rbaccheck.Operator(t, ctx, admin, "tailscale", env.Namespace(t))
}
