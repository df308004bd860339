package official

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Each side gets the seed's objects with its own class and nothing else
// changed; the original stays as it was.
func TestForSide(t *testing.T) {
	ing := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "networking.k8s.io/v1", "kind": "Ingress", "metadata": map[string]any{"name": "my-app"},
		"spec": map[string]any{"ingressClassName": "tailscale", "tls": []any{map[string]any{"hosts": []any{"my-app"}}}},
	}}
	lb := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Service", "metadata": map[string]any{"name": "postgres-lb"},
		"spec": map[string]any{"type": "LoadBalancer", "loadBalancerClass": "tailscale"},
	}}
	exposed := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Service", "metadata": map[string]any{"name": "postgres", "annotations": map[string]any{"tailscale.com/expose": "true"}},
		"spec": map[string]any{"ports": []any{}},
	}}
	tp := Sides()[1]
	if got, _, _ := unstructured.NestedString(ForSide(ing, tp).Object, "spec", "ingressClassName"); got != TailplaneClass {
		t.Errorf("Ingress class %q, want %s", got, TailplaneClass)
	}
	if got, _, _ := unstructured.NestedString(ForSide(lb, tp).Object, "spec", "loadBalancerClass"); got != TailplaneClass {
		t.Errorf("loadBalancerClass %q, want %s", got, TailplaneClass)
	}
	if _, ok, _ := unstructured.NestedString(ForSide(exposed, tp).Object, "spec", "loadBalancerClass"); ok {
		t.Error("an exposed ClusterIP Service got a loadBalancerClass")
	}
	if got, _, _ := unstructured.NestedString(ing.Object, "spec", "ingressClassName"); got != "tailscale" {
		t.Errorf("the original Ingress changed to %q", got)
	}
	if got, _, _ := unstructured.NestedString(ForSide(ing, Sides()[0]).Object, "spec", "ingressClassName"); got != OfficialClass {
		t.Errorf("official Ingress class %q", got)
	}
}
