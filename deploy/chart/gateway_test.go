package chart_test

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tailplane/tailplane/deploy/chart"
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

// The chart's Gateway API CRDs are exactly the module's standard channel
// (without its safe-upgrades ValidatingAdmissionPolicy): refresh them with
// `go tool task manifests:gateway-crds`.
func TestChartGatewayCRDsMatchModule(t *testing.T) {
	dir := gatewayAPIDir(t)
	names, err := filepath.Glob(filepath.Join(dir, "config/crd/standard/gateway.networking.k8s.io_*.yaml"))
	if err != nil || len(names) == 0 {
		t.Fatalf("gateway-api CRDs: %v", err)
	}
	var want []string
	for _, n := range names {
		if !strings.Contains(filepath.Base(n), "_vap_") {
			want = append(want, n)
		}
	}
	sameCopies(t, want, "files/gateway-api", "go tool task manifests:gateway-crds")
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
	for _, bad := range []string{"gatewayAPI.installCRDs=maybe", "gatewayAPI.gatewayClass.name=", "gatewayAPI.channel=experimental"} {
		if _, err := chart.Render(t.Context(), chart.Namespace, seedValues(t, bad)); err == nil {
			t.Errorf("%s was accepted", bad)
		}
	}
}
