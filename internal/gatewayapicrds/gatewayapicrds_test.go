package gatewayapicrds_test

import (
	"context"
	"os"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/tailplane/tailplane/internal/gatewayapicrds"
	"github.com/tailplane/tailplane/internal/testenv"
)

var env = testenv.New()

func TestMain(m *testing.M) { os.Exit(env.Run(m)) }

// The embedded CRDs are the experimental channel's, each a CRD with the
// channel's annotations, sorted by name.
func TestObjectsAreTheExperimentalChannel(t *testing.T) {
	objs, err := gatewayapicrds.Objects()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, o := range objs {
		names = append(names, o.GetName())
		if o.GetKind() != "CustomResourceDefinition" || o.GetAnnotations()["gateway.networking.k8s.io/channel"] != "experimental" {
			t.Errorf("%s: kind %s, annotations %v", o.GetName(), o.GetKind(), o.GetAnnotations())
		}
	}
	for _, want := range []string{"httproutes.gateway.networking.k8s.io", "tcproutes.gateway.networking.k8s.io", "xbackendtrafficpolicies.gateway.networking.x-k8s.io"} {
		if !slices.Contains(names, want) {
			t.Errorf("no %s in %v", want, names)
		}
	}
	if !slices.IsSorted(names) {
		t.Errorf("not sorted: %v", names)
	}
}

// Into a real API server: auto installs what is missing and leaves alone a
// CRD installed by someone else; it upgrades one its release's templates
// installed, and what it installed itself; true takes over the foreign
// one. Each served CRD ends with the experimental channel's annotation.
func TestInstall(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dyn := dynamic.NewForConfigOrDie(env.Config(t))
	objs, err := gatewayapicrds.Objects()
	if err != nil {
		t.Fatal(err)
	}
	pick := func(name string) *unstructured.Unstructured {
		for _, o := range objs {
			if o.GetName() == name {
				return o.DeepCopy()
			}
		}
		t.Fatalf("no CRD %s", name)
		return nil
	}
	const release = "tailscale/tailscale-operator"
	foreign, fromTemplates := pick("xmeshes.gateway.networking.x-k8s.io"), pick("xbackends.gateway.networking.x-k8s.io")
	foreign.SetAnnotations(map[string]string{"gateway.networking.k8s.io/channel": "standard"})
	fromTemplates.SetAnnotations(map[string]string{"gateway.networking.k8s.io/channel": "standard",
		"meta.helm.sh/release-name": "tailscale-operator", "meta.helm.sh/release-namespace": "tailscale"})
	if err := testenv.InstallCRDs(ctx, dyn, foreign, fromTemplates); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, o := range objs {
			_ = dyn.Resource(gatewayapicrds.CRDs).Delete(context.Background(), o.GetName(), metav1.DeleteOptions{})
		}
	})
	channel := func(name string) string {
		live, err := dyn.Resource(gatewayapicrds.CRDs).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return live.GetAnnotations()["gateway.networking.k8s.io/channel"]
	}

	res, err := gatewayapicrds.Install(ctx, dyn, objs, gatewayapicrds.ModeAuto, release)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.LeftAlone, []string{foreign.GetName()}) || len(res.Applied) != len(objs)-1 {
		t.Fatalf("auto: applied %v, left alone %v", res.Applied, res.LeftAlone)
	}
	if channel(foreign.GetName()) != "standard" || channel(fromTemplates.GetName()) != "experimental" || channel("httproutes.gateway.networking.k8s.io") != "experimental" {
		t.Error("auto wrote the wrong CRDs")
	}

	// Again (helm upgrade): the same, its own CRDs re-applied.
	if res, err = gatewayapicrds.Install(ctx, dyn, objs, gatewayapicrds.ModeAuto, release); err != nil || len(res.Applied) != len(objs)-1 {
		t.Fatalf("auto again: applied %v, left alone %v, %v", res.Applied, res.LeftAlone, err)
	}
	// Another release leaves them all alone.
	if res, err = gatewayapicrds.Install(ctx, dyn, objs, gatewayapicrds.ModeAuto, "other/release"); err != nil || len(res.Applied) != 0 {
		t.Fatalf("another release: applied %v, %v", res.Applied, err)
	}

	// A field someone else set survives; true takes over the foreign CRD.
	if _, err := dyn.Resource(gatewayapicrds.CRDs).Patch(ctx, "httproutes.gateway.networking.k8s.io", types.MergePatchType,
		[]byte(`{"metadata":{"labels":{"team":"net"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	if res, err = gatewayapicrds.Install(ctx, dyn, objs, gatewayapicrds.ModeAlways, release); err != nil || len(res.Applied) != len(objs) {
		t.Fatalf("true: applied %v, left alone %v, %v", res.Applied, res.LeftAlone, err)
	}
	if channel(foreign.GetName()) != "experimental" {
		t.Error("true left the foreign CRD alone")
	}
	live, err := dyn.Resource(gatewayapicrds.CRDs).Get(ctx, "httproutes.gateway.networking.k8s.io", metav1.GetOptions{})
	if err != nil || live.GetLabels()["team"] != "net" || live.GetAnnotations()[gatewayapicrds.AnnotationRelease] != release {
		t.Errorf("httproutes labels %v, annotations %v (%v)", live.GetLabels(), live.GetAnnotations(), err)
	}
}

func TestParseMode(t *testing.T) {
	for in, ok := range map[string]bool{"auto": true, "true": true, "false": false, "": false, "yes": false} {
		if _, err := gatewayapicrds.ParseMode(in); (err == nil) != ok {
			t.Errorf("ParseMode(%q): %v", in, err)
		}
	}
}
