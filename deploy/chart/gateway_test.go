package chart_test

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"github.com/tailplane/tailplane/deploy/chart"
	"github.com/tailplane/tailplane/internal/gatewayapicrds"
)

// gatewayAPIDir is the module cache folder of the sigs.k8s.io/gateway-api
// version in go.mod.
func gatewayAPIDir(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "mod", "download", "-json", "sigs.k8s.io/gateway-api").Output()
	if err != nil {
		t.Fatalf("go mod download sigs.k8s.io/gateway-api: %v", err)
	}
	var m struct{ Dir string }
	if err := json.Unmarshal(out, &m); err != nil || m.Dir == "" {
		t.Fatalf("go mod download: %v %s", err, out)
	}
	return m.Dir
}

// The chart's Gateway API CRDs are exactly the module's standard channel,
// and the operator image's (internal/gatewayapicrds) its experimental one,
// both without the safe-upgrades ValidatingAdmissionPolicy: refresh them
// with `go tool task manifests:gateway-crds`.
func TestGatewayCRDCopiesMatchModule(t *testing.T) {
	dir := gatewayAPIDir(t)
	for channel, copies := range map[string]string{
		"standard":     "files/gateway-api",
		"experimental": "../../../internal/gatewayapicrds/experimental",
	} {
		names, err := filepath.Glob(filepath.Join(dir, "config/crd", channel, "gateway.networking*.yaml"))
		if err != nil || len(names) == 0 {
			t.Fatalf("gateway-api %s CRDs: %v", channel, err)
		}
		var want []string
		for _, n := range names {
			if !strings.Contains(filepath.Base(n), "_vap_") {
				want = append(want, n)
			}
		}
		sameCopies(t, want, copies, "go tool task manifests:gateway-crds")
	}
}

var gatewayCRDs = []string{
	"backendtlspolicies", "gatewayclasses", "gateways", "grpcroutes", "httproutes",
	"listenersets", "referencegrants", "tcproutes", "tlsroutes", "udproutes",
}

// gatewayAPI.installCRDs: auto (the default; offline lookup finds nothing)
// and true render every standard CRD, kept on uninstall; false none. The
// GatewayClass is the operator's to create (OPERATOR_GATEWAY_CLASS_NAME),
// never a template: Helm cannot install a custom resource with its CRD.
func TestRenderGatewayAPI(t *testing.T) {
	for _, mode := range []string{"", "gatewayAPI.installCRDs=auto", "gatewayAPI.installCRDs=true"} {
		var extra []string
		if mode != "" {
			extra = append(extra, mode)
		}
		objs := render(t, seedValues(t, extra...))
		for _, r := range gatewayCRDs {
			crd := objs["CustomResourceDefinition/"+r+".gateway.networking.k8s.io"]
			if crd == nil {
				t.Errorf("%q: no CRD %s", mode, r)
				continue
			}
			a := crd.GetAnnotations()
			if a["helm.sh/resource-policy"] != "keep" || a["gateway.networking.k8s.io/bundle-version"] != "v1.6.3" || a["gateway.networking.k8s.io/channel"] != "standard" {
				t.Errorf("%q: CRD %s annotations %v", mode, r, a)
			}
		}
		for name := range objs {
			if strings.HasPrefix(name, "GatewayClass/") || strings.HasPrefix(name, "ValidatingAdmissionPolicy") {
				t.Errorf("%q rendered %s", mode, name)
			}
		}
		if got := env(t, objs.deployment(t))["OPERATOR_GATEWAY_CLASS_NAME"].Value; got != "tailscale" {
			t.Errorf("%q: OPERATOR_GATEWAY_CLASS_NAME %q", mode, got)
		}
	}

	objs := render(t, seedValues(t, "gatewayAPI.installCRDs=false", "gatewayAPI.gatewayClass.name=tailnet"))
	for name := range objs {
		if strings.HasSuffix(name, ".gateway.networking.k8s.io") {
			t.Errorf("installCRDs=false rendered %s", name)
		}
	}
	if objs["CustomResourceDefinition/proxyclasses.tailscale.com"] == nil {
		t.Error("gatewayAPI.installCRDs=false dropped the tailscale.com CRDs")
	}
	if got := env(t, objs.deployment(t))["OPERATOR_GATEWAY_CLASS_NAME"].Value; got != "tailnet" {
		t.Errorf("OPERATOR_GATEWAY_CLASS_NAME %q, want tailnet", got)
	}
	e := env(t, render(t, seedValues(t, "gatewayAPI.gatewayClass.create=false")).deployment(t))
	if _, ok := e["OPERATOR_GATEWAY_CLASS_NAME"]; ok {
		t.Error("gatewayClass.create=false still sets OPERATOR_GATEWAY_CLASS_NAME")
	}
	for _, bad := range []string{"gatewayAPI.installCRDs=maybe", "gatewayAPI.gatewayClass.name=", "gatewayAPI.channel=beta"} {
		if _, err := chart.Render(t.Context(), chart.Namespace, seedValues(t, bad)); err == nil {
			t.Errorf("%s was accepted", bad)
		}
	}
}

// gatewayAPI.channel=experimental: no standard CRD is a template; a
// pre-install and pre-upgrade hook Job runs the operator image with
// TAILPLANE_GATEWAY_API_CRDS (installCRDs' mode) as a ServiceAccount that
// may create CRDs and get and patch the ones the image embeds, by name;
// installCRDs=false renders no hook.
func TestRenderGatewayAPIExperimental(t *testing.T) {
	embedded, err := gatewayapicrds.Objects()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, o := range embedded {
		names = append(names, o.GetName())
	}
	for mode, want := range map[string]string{"auto": "auto", "true": "true"} {
		vals := seedValues(t, "gatewayAPI.channel=experimental", "gatewayAPI.installCRDs="+mode)
		for name := range render(t, vals) {
			if strings.HasPrefix(name, "CustomResourceDefinition/") && strings.Contains(name, "gateway.networking") {
				t.Errorf("%s: the template %s", mode, name)
			}
		}
		hooks := hookObjects(t, vals)
		job := hooks["Job/gateway-api-crds"]
		if job == nil || len(hooks) != 4 {
			t.Fatalf("%s: hooks %v", mode, keys(hooks))
		}
		for name, obj := range hooks {
			if h := obj.GetAnnotations()["helm.sh/hook"]; h != "pre-install,pre-upgrade" {
				t.Errorf("%s: %s hook %q", mode, name, h)
			}
		}
		var j batchv1.Job
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(job.Object, &j); err != nil {
			t.Fatal(err)
		}
		spec := j.Spec.Template.Spec
		got := map[string]string{}
		for _, e := range spec.Containers[0].Env {
			got[e.Name] = e.Value
		}
		if spec.ServiceAccountName != "gateway-api-crds" || got["TAILPLANE_GATEWAY_API_CRDS"] != want || got["TAILPLANE_RELEASE"] != chart.Namespace+"/"+chart.ReleaseName {
			t.Errorf("%s: service account %q, env %v", mode, spec.ServiceAccountName, got)
		}
		if spec.Containers[0].Image != render(t, vals).deployment(t).Spec.Template.Spec.Containers[0].Image {
			t.Errorf("%s: the hook runs %s, not the operator's image", mode, spec.Containers[0].Image)
		}
		var role rbacv1.ClusterRole
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(hooks["ClusterRole/tailplane-gateway-api-crds"].Object, &role); err != nil {
			t.Fatal(err)
		}
		if len(role.Rules) != 2 || !reflect.DeepEqual(role.Rules[0].Verbs, []string{"create"}) || len(role.Rules[0].ResourceNames) != 0 ||
			!reflect.DeepEqual(role.Rules[1].Verbs, []string{"get", "patch"}) || !reflect.DeepEqual(role.Rules[1].ResourceNames, names) {
			t.Errorf("%s: rules %+v, want create, and get and patch of %v", mode, role.Rules, names)
		}
	}
	if hooks := hookObjects(t, seedValues(t, "gatewayAPI.channel=experimental", "gatewayAPI.installCRDs=false")); len(hooks) != 0 {
		t.Errorf("installCRDs=false: hooks %v", keys(hooks))
	}
	if hooks := hookObjects(t, seedValues(t)); hooks["Job/gateway-api-crds"] != nil {
		t.Error("the standard channel runs the experimental hook")
	}
}

// The release Helm stores (JSON, gzip, base64 in a Secret, as its Secret
// driver does) stays under the API's 1 MiB limit on Secrets, with room, on
// either channel: the experimental CRDs are not in the chart for that
// reason. (The standard channel's release is the larger, about 800 KiB: its
// CRDs are in the chart's files and again in the rendered manifest.)
func TestReleaseFitsInASecret(t *testing.T) {
	for _, vals := range []map[string]any{seedValues(t), seedValues(t, "gatewayAPI.channel=experimental")} {
		rel, err := chart.Render(t.Context(), chart.Namespace, vals)
		if err != nil {
			t.Fatal(err)
		}
		b, err := json.Marshal(rel)
		if err != nil {
			t.Fatal(err)
		}
		var zipped bytes.Buffer
		zw := gzip.NewWriter(&zipped)
		if _, err := zw.Write(b); err != nil {
			t.Fatal(err)
		}
		if err := zw.Close(); err != nil {
			t.Fatal(err)
		}
		size := base64.StdEncoding.EncodedLen(zipped.Len())
		t.Logf("stored release: %d bytes (%d bytes of JSON)", size, len(b))
		if size > 960<<10 {
			t.Errorf("the stored release is %d bytes: less than 64 KiB from the 1 MiB limit of a Secret", size)
		}
	}
}

// hookObjects are the chart's hooks rendered with vals, by "Kind/name".
func hookObjects(t *testing.T, vals map[string]any) map[string]*unstructured.Unstructured {
	t.Helper()
	rel, err := chart.Render(t.Context(), chart.Namespace, vals)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*unstructured.Unstructured{}
	for _, h := range rel.Hooks {
		if h.Name == "operator-uninstall" {
			continue
		}
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(h.Manifest), &u.Object); err != nil {
			t.Fatalf("hook %s: %v", h.Name, err)
		}
		out[u.GetKind()+"/"+u.GetName()] = u
	}
	return out
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
