package pipeline

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"
)

func stateSecret(data map[string]any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{"name": "ts-web-0"}, "data": data}}
}

// Only the device keys (and config_error) of a state Secret re-handle its
// parent; tailscaled's own keys change often and do not.
func TestStateChangedFiltersTailscaledKeys(t *testing.T) {
	steps := []struct {
		typ  watch.EventType
		data map[string]any
		want bool
	}{
		{watch.Added, map[string]any{}, false},                                             // just created by the operator
		{watch.Modified, map[string]any{"_machinekey": "bWs="}, false},                     // tailscaled state
		{watch.Modified, map[string]any{"_machinekey": "bWs=", "device_id": "bjE="}, true}, // logged in
		{watch.Modified, map[string]any{"_machinekey": "bWsy", "device_id": "bjE="}, false},
		{watch.Modified, map[string]any{"device_id": "bjE=", "device_fqdn": "d2Vi"}, true},
		{watch.Added, map[string]any{"device_id": "bjE="}, true}, // seen again after a restart
	}
	var prev *unstructured.Unstructured
	for i, s := range steps {
		cur := stateSecret(s.data)
		old := prev
		if s.typ != watch.Modified {
			old = nil
		}
		if got := stateChanged(s.typ, old, cur); got != s.want {
			t.Errorf("step %d (%s %v): got %v, want %v", i, s.typ, s.data, got, s.want)
		}
		prev = cur
	}
}

// A state Secret's name gives its proxy's base name; other names do not.
func TestReplicaBase(t *testing.T) {
	for name, want := range map[string]string{"ts-web-1a2b3c4d-0": "ts-web-1a2b3c4d", "ts-web-1a2b3c4d-12": "ts-web-1a2b3c4d",
		"ts-web-1a2b3c4d-config": "", "ts-web-1a2b3c4d-01": "", "web": "", "-0": ""} {
		got, ok := replicaBase(name)
		if got != want && ok || ok != (want != "") {
			t.Errorf("replicaBase(%q) = %q, %v; want %q", name, got, ok, want)
		}
	}
}
