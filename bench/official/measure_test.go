package official

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

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

// DevicesLeaving times the last device that left and names those that
// stayed past the wait, as an operator that never deletes them leaves them.
func TestDevicesLeaving(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/api/v2/oauth/token" {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"access_token":"t","token_type":"Bearer","expires_in":3600}`)
			return
		}
		// a and b leave after the second and third listing; c stays.
		n := calls.Add(1)
		devices := []string{`{"id":"3","name":"default-c.ts.net"}`}
		if n <= 2 {
			devices = append(devices, `{"id":"1","name":"default-a.ts.net"}`)
		}
		if n <= 3 {
			devices = append(devices, `{"id":"2","name":"default-b.ts.net"}`)
		}
		fmt.Fprintf(w, `{"devices":[%s]}`, strings.Join(devices, ","))
	}))
	defer srv.Close()
	env := TailnetEnv{"TS_API_URL": srv.URL}
	start := time.Now()
	last, stayed, err := DevicesLeaving(context.Background(), env, []string{"default-a", "default-b", "default-c"}, start, 3*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(stayed, []string{"default-c"}) {
		t.Fatalf("stayed %v, want default-c", stayed)
	}
	if last < time.Second || last > 2*time.Second {
		t.Fatalf("the last device left after %s, want the fourth listing (about 1.5 s)", last)
	}
}
