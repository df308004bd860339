package chart_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/release"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"k8s.io/client-go/dynamic"

	"github.com/tailplane/tailplane/deploy/chart"
	"github.com/tailplane/tailplane/deploy/internal/rbaccheck"
	"github.com/tailplane/tailplane/internal/testenv"
)

var testEnv = testenv.New()

func TestMain(m *testing.M) { os.Exit(testEnv.Run(m)) }

func operatorEnv(t *testing.T, ctx context.Context) (*appsv1.Deployment, map[string]string) {
	t.Helper()
	d, err := testEnv.Clientset(t).AppsV1().Deployments(chart.Namespace).Get(ctx, "operator", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, e := range d.Spec.Template.Spec.Containers[0].Env {
		out[e.Name] = e.Value
	}
	return d, out
}

// releaseSecret is the name of the Secret in which Helm records a revision.
func releaseSecret(revision int) string {
	return fmt.Sprintf("sh.helm.release.v1.%s.v%d", chart.ReleaseName, revision)
}

func wantDeployed(t *testing.T, rel *release.Release, revision int) {
	t.Helper()
	if rel.Info.Status != release.StatusDeployed || rel.Version != revision {
		t.Fatalf("release %s revision %d is %s, want revision %d deployed", rel.Name, rel.Version, rel.Info.Status, revision)
	}
}

// The chart installed with the Helm SDK, as the seed's command does (release
// tailscale-operator, namespace tailscale created), into a real apiserver:
// the objects exist, the installed RBAC passes the least-privilege checks,
// an upgrade with a changed value updates the Deployment, and an upgrade
// with a bad value fails with its message and changes nothing.
func TestInstallUpgrade(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	admin := testEnv.Config(t)
	cs := testEnv.Clientset(t)

	// A Gateway API CRD installed otherwise (not by a release): the
	// default gatewayAPI.installCRDs=auto leaves it alone.
	dyn := dynamic.NewForConfigOrDie(admin)
	foreign := rbaccheck.ServiceMonitorCRD(t, chart.Name+"/files/gateway-api/gateway.networking.k8s.io_referencegrants.yaml")
	if err := testenv.InstallCRDs(ctx, dyn, foreign); err != nil {
		t.Fatal(err)
	}

	// No Wait: this apiserver runs no deployment controller.
	rel, err := chart.Install(ctx, admin, chart.Namespace, chart.Options{Values: seedValues(t)})
	if err != nil {
		t.Fatal(err)
	}
	wantGatewayCRDs(t, ctx, dyn, rel)
	// 1, unless -count reruns the test against the same apiserver.
	first := rel.Version
	wantDeployed(t, rel, first)
	if !strings.Contains(rel.Info.Notes, "installed in namespace tailscale") {
		t.Errorf("notes: %q", rel.Info.Notes)
	}
	// Helm's record of the release, as `helm status` reads it.
	stored, err := cs.CoreV1().Secrets(chart.Namespace).Get(ctx, releaseSecret(first), metav1.GetOptions{})
	if err != nil || stored.Labels["status"] != "deployed" || stored.Labels["owner"] != "helm" {
		t.Errorf("release Secret %v: %v", stored.Labels, err)
	}
	secret, err := cs.CoreV1().Secrets(chart.Namespace).Get(ctx, "operator-oauth", metav1.GetOptions{})
	if err != nil || string(secret.Data["client_id"]) != "k123CNTRL" {
		t.Fatalf("OAuth Secret %v: %v", secret.Data, err)
	}
	if _, err := cs.NetworkingV1().IngressClasses().Get(ctx, "tailscale", metav1.GetOptions{}); err != nil {
		t.Error(err)
	}
	_, envs := operatorEnv(t, ctx)
	if envs["OPERATOR_HOSTNAME"] != "tailscale-operator" || envs["OPERATOR_INITIAL_TAGS"] != "tag:k8s-operator" || envs["OPERATOR_SECRET"] != "operator" {
		t.Errorf("operator env %v", envs)
	}

	t.Run("RBAC", func(t *testing.T) {
		rbaccheck.Apply(t, ctx, admin, []*unstructured.Unstructured{rbaccheck.ServiceMonitorCRD(t, "../manifests/testdata/servicemonitor-crd.yaml")})
		rbaccheck.Operator(t, ctx, admin, chart.Namespace, testEnv.Namespace(t))
	})

	before, _ := operatorEnv(t, ctx)
	rel, err = chart.Install(ctx, admin, chart.Namespace, chart.Options{Values: seedValues(t,
		"operatorConfig.logging=debug", "loginServer=https://control.example.com")})
	if err != nil {
		t.Fatal(err)
	}
	wantDeployed(t, rel, first+1)
	wantGatewayCRDs(t, ctx, dyn, rel) // the release keeps managing the CRDs it installed
	after, envs := operatorEnv(t, ctx)
	if envs["OPERATOR_LOGGING"] != "debug" || envs["OPERATOR_LOGIN_SERVER"] != "https://control.example.com" {
		t.Errorf("after the upgrade, operator env %v", envs)
	}
	if after.Generation <= before.Generation {
		t.Errorf("the upgrade did not change the Deployment (generation %d -> %d)", before.Generation, after.Generation)
	}

	_, err = chart.Install(ctx, admin, chart.Namespace, chart.Options{Values: seedValues(t, "apiServerProxyConfig.mode=sometimes")})
	if err == nil || !strings.Contains(err.Error(), `apiServerProxyConfig.mode is "sometimes"`) {
		t.Fatalf("upgrade with apiServerProxyConfig.mode=sometimes: %v", err)
	}
	unchanged, _ := operatorEnv(t, ctx)
	if unchanged.ResourceVersion != after.ResourceVersion {
		t.Error("a refused upgrade changed the Deployment")
	}
	if _, err := cs.CoreV1().Secrets(chart.Namespace).Get(ctx, releaseSecret(first+2), metav1.GetOptions{}); err == nil {
		t.Error("a refused upgrade recorded a revision")
	}
}

// An install that fails (here: --wait runs out, as when devcluster is slow
// or Ctrl-C stops `go tool task dev`) is recorded as failed, and the next
// Install upgrades from it: a failed run never blocks the next one.
func TestInstallAfterFailedInstall(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	admin := testEnv.Config(t)
	ns := testEnv.Namespace(t)
	// TakeOwnership: the cluster-scoped objects may belong to the release
	// of TestInstallUpgrade, in another namespace.
	opts := chart.Options{Values: seedValues(t), TakeOwnership: true, Wait: true, Timeout: 2 * time.Second}
	// No deployment controller here: the Deployment never becomes ready.
	if _, err := chart.Install(ctx, admin, ns, opts); err == nil {
		t.Fatal("the wait for a Deployment that never becomes ready succeeded")
	}
	stored, err := testEnv.Clientset(t).CoreV1().Secrets(ns).Get(ctx, releaseSecret(1), metav1.GetOptions{})
	if err != nil || stored.Labels["status"] != "failed" {
		t.Fatalf("release after the failed install: %v, %v", stored.Labels, err)
	}
	opts.Wait = false
	rel, err := chart.Install(ctx, admin, ns, opts)
	if err != nil {
		t.Fatal(err)
	}
	wantDeployed(t, rel, 2)
}

// wantGatewayCRDs checks that release rel manages the Gateway API CRDs it
// installed (gatewayclasses), kept on uninstall, and not referencegrants,
// which was installed otherwise.
func wantGatewayCRDs(t *testing.T, ctx context.Context, dyn dynamic.Interface, rel *release.Release) {
	t.Helper()
	if !strings.Contains(rel.Manifest, "name: gatewayclasses.gateway.networking.k8s.io\n") {
		t.Error("the release does not manage the GatewayClass CRD")
	}
	if strings.Contains(rel.Manifest, "name: referencegrants.gateway.networking.k8s.io\n") {
		t.Error("the release took over the ReferenceGrant CRD installed otherwise")
	}
	crd, err := dyn.Resource(testenv.CRDResource).Get(ctx, "gatewayclasses.gateway.networking.k8s.io", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if a := crd.GetAnnotations(); a["meta.helm.sh/release-name"] != chart.ReleaseName || a["helm.sh/resource-policy"] != "keep" {
		t.Errorf("GatewayClass CRD annotations %v", a)
	}
}
