package plugin_test

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/tailplane/tailplane/handlers/plugin"
)

func rp(t *testing.T, name string, order int, targets map[string]any, accepted bool) *plugin.RoutingPlugin {
	t.Helper()
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "tailplane.dev/v1alpha1", "kind": "RoutingPlugin",
		"metadata": map[string]any{"name": name, "namespace": "apps", "generation": int64(2)},
		"spec": map[string]any{"module": map[string]any{"configMapKeyRef": map[string]any{"name": "m", "key": "k"}},
			"order": int64(order), "timeout": "50ms", "memoryLimit": "32Mi", "targets": targets},
	}}
	if accepted {
		u.Object["status"] = map[string]any{"sha256": "abc", "chunks": int64(2), "conditions": []any{map[string]any{
			"type": "Accepted", "status": "True", "reason": "Compiled", "message": "", "observedGeneration": int64(2),
			"lastTransitionTime": metav1.Now().UTC().Format("2006-01-02T15:04:05Z")}}}
	}
	p, err := plugin.Decode(u)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestForProxyPicksAcceptedTargetsInOrder(t *testing.T) {
	byName := map[string]any{"targetRefs": []any{map[string]any{"kind": "Ingress", "name": "web"}}}
	byLabel := map[string]any{"selectors": []any{map[string]any{"kind": "Ingress", "matchLabels": map[string]any{"team": "a"}}}}
	serviceOnly := map[string]any{"targetRefs": []any{map[string]any{"kind": "Service", "name": "web"}}}
	list := []*plugin.RoutingPlugin{
		rp(t, "late", 10, byName, true),
		rp(t, "early", -5, byLabel, true),
		rp(t, "pending", 0, byName, false),
		rp(t, "svc", 0, serviceOnly, true),
	}
	got, secrets := plugin.ForProxy(list, "Ingress", "apps", "web", map[string]string{"team": "a"})
	if len(got) != 2 || got[0].Name != "apps/early" || got[1].Name != "apps/late" || len(secrets) != 4 || secrets[0] != "tp-wasm-abc-0" {
		t.Fatalf("got %+v %v", got, secrets)
	}
	if other, _ := plugin.ForProxy(list, "Ingress", "other", "web", nil); len(other) != 0 {
		t.Fatalf("plugin applied across namespaces: %+v", other)
	}
	cfg, err := plugin.HostConfig(list[0], nil)
	if err != nil || cfg.MemoryLimit != 32<<20 || cfg.Timeout.Milliseconds() != 50 {
		t.Fatalf("host config %+v %v", cfg, err)
	}
}

// Istio's pull policy default: Always for latest or no tag, else
// IfNotPresent; a digest reference never needs a pull.
func TestPullPolicyDefault(t *testing.T) {
	for ref, want := range map[string]string{
		"oci://ghcr.io/me/canary:v1":         plugin.PullIfNotPresent,
		"ghcr.io/me/canary":                  plugin.PullAlways,
		"ghcr.io/me/canary:latest":           plugin.PullAlways,
		"registry.lan:5000/canary":           plugin.PullAlways,
		"registry.lan:5000/canary:2":         plugin.PullIfNotPresent,
		"ghcr.io/me/canary@sha256:" + "ab12": plugin.PullIfNotPresent,
	} {
		p := &plugin.RoutingPlugin{}
		p.Spec.Module.OCI = &plugin.OCISource{Ref: ref}
		if got := p.PullPolicy(); got != want {
			t.Errorf("%s: %s, want %s", ref, got, want)
		}
	}
}
