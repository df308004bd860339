package connector

import (
	"testing"

	"github.com/tailplane/tailplane/crds/tailscale/v1alpha1"
)

// A subnet router's status says isExitNode: false and isAppConnector:
// false, as the official operator's does, so kubectl get shows "false";
// fields that are empty are removed.
func TestStatusPatchKeepsFalseFlags(t *testing.T) {
	p := statusPatch(v1alpha1.ConnectorStatus{SubnetRoutes: "10.42.0.0/16"})
	for k, want := range map[string]any{"isExitNode": false, "isAppConnector": false, "subnetRoutes": "10.42.0.0/16", "hostname": nil, "devices": nil} {
		if got, ok := p[k]; !ok || got != want {
			t.Errorf("%s = %v (present %v), want %v", k, got, ok, want)
		}
	}
	if p := statusPatch(v1alpha1.ConnectorStatus{IsExitNode: true}); p["isExitNode"] != true {
		t.Errorf("isExitNode = %v, want true", p["isExitNode"])
	}
}
