package crds_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/tailplane/tailplane/crds/tailscale/v1alpha1"
)

func dynamicClient(t *testing.T) dynamic.Interface {
	t.Helper()
	setup(t) // installs every CRD in crds/
	return dynamic.NewForConfigOrDie(env.Config(t))
}

func object(kind, name string, spec map[string]any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "tailscale.com/v1alpha1",
		"kind":       kind,
		"metadata":   map[string]any{"name": name},
		"spec":       spec,
	}}
}

type refusal struct {
	name, want string
	spec       map[string]any
}

// expectRefused creates each object and checks the apiserver refuses it with
// the wanted text.
func expectRefused(t *testing.T, client dynamic.ResourceInterface, kind string, cases []refusal) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := client.Create(context.Background(), object(kind, "invalid-"+tc.name, tc.spec), metav1.CreateOptions{})
			if err == nil {
				_ = client.Delete(context.Background(), "invalid-"+tc.name, metav1.DeleteOptions{})
				t.Fatalf("accepted; want refusal with %q", tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("refused with %q; want %q", err, tc.want)
			}
		})
	}
}

func createOrFail(t *testing.T, client dynamic.ResourceInterface, obj *unstructured.Unstructured) *unstructured.Unstructured {
	t.Helper()
	created, err := client.Create(context.Background(), obj, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("%s %s was refused: %v", obj.GetKind(), obj.GetName(), err)
	}
	t.Cleanup(func() { _ = client.Delete(context.Background(), obj.GetName(), metav1.DeleteOptions{}) })
	return created
}

// The seed's ProxyGroup manifest is the contract: it applies unchanged.
func TestSeedProxyGroupApplies(t *testing.T) {
	client := dynamicClient(t).Resource(v1alpha1.ProxyGroupsResource)
	obj := readManifest(t, "../examples/seed/07-proxygroup.yaml")
	created := createOrFail(t, client, obj)
	if typ, _, _ := unstructured.NestedString(created.Object, "spec", "type"); typ != "ingress" {
		t.Fatalf("spec.type = %q, want ingress", typ)
	}
}

func TestProxyGroupValidation(t *testing.T) {
	client := dynamicClient(t).Resource(v1alpha1.ProxyGroupsResource)
	expectRefused(t, client, "ProxyGroup", []refusal{
		{"no-type", `spec.type: Required value`, map[string]any{"replicas": int64(1)}},
		{"bad-type", `Unsupported value: "router"`, map[string]any{"type": "router"}},
		{"negative-replicas", "should be greater than or equal to 0", map[string]any{"type": "egress", "replicas": int64(-1)}},
		{"bad-prefix", `should match '^[a-z0-9][a-z0-9-]{0,61}$'`, map[string]any{"type": "egress", "hostnamePrefix": "-bad"}},
		{"bad-tag", `should match '^tag:[a-zA-Z][a-zA-Z0-9-]*$'`, map[string]any{"type": "egress", "tags": []any{"k8s"}}},
		{"bad-mode", `Unsupported value: "open"`, map[string]any{"type": "kube-apiserver", "kubeAPIServer": map[string]any{"mode": "open"}}},
		{"bad-api-hostname", `should match '^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$'`,
			map[string]any{"type": "kube-apiserver", "kubeAPIServer": map[string]any{"hostname": "API"}}},
	})

	// type and tailnet are fixed at creation, with the official messages.
	created := createOrFail(t, client, object("ProxyGroup", "immutable", map[string]any{"type": "egress", "tailnet": "a"}))
	for _, tc := range []struct{ field, value, want string }{
		{"type", "ingress", "ProxyGroup type is immutable"},
		{"tailnet", "b", "ProxyGroup tailnet is immutable"},
	} {
		changed := created.DeepCopy()
		_ = unstructured.SetNestedField(changed.Object, tc.value, "spec", tc.field)
		if _, err := client.Update(context.Background(), changed, metav1.UpdateOptions{}); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("changing spec.%s: got %v, want %q", tc.field, err, tc.want)
		}
	}
	// Other fields may change.
	changed := created.DeepCopy()
	_ = unstructured.SetNestedField(changed.Object, int64(3), "spec", "replicas")
	if _, err := client.Update(context.Background(), changed, metav1.UpdateOptions{}); err != nil {
		t.Errorf("changing spec.replicas: %v", err)
	}
}

// kubectl get shows the official columns; Status is the ProxyGroupReady reason.
func TestProxyGroupPrinterColumns(t *testing.T) {
	dyn := dynamicClient(t)
	client := dyn.Resource(v1alpha1.ProxyGroupsResource)
	created := createOrFail(t, client, object("ProxyGroup", "columns", map[string]any{"type": "kube-apiserver"}))
	_ = unstructured.SetNestedField(created.Object, "https://columns.example.ts.net", "status", "url")
	_ = unstructured.SetNestedSlice(created.Object, []any{map[string]any{
		"type": v1alpha1.ProxyGroupReady, "status": "False", "reason": v1alpha1.ReasonProxyGroupCreating,
		"message": "0/2 ProxyGroup pods running", "lastTransitionTime": "2026-01-01T00:00:00Z",
	}}, "status", "conditions")
	if _, err := client.UpdateStatus(context.Background(), created, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	cols, row := table(t, "proxygroups", "columns")
	want := map[string]any{"Status": "ProxyGroupCreating", "URL": "https://columns.example.ts.net", "Type": "kube-apiserver"}
	for i, c := range cols {
		if w, ok := want[c]; ok && row[i] != w {
			t.Errorf("column %s = %v, want %v", c, row[i], w)
		}
		delete(want, c)
	}
	if len(want) != 0 {
		t.Errorf("missing columns %v in %v", want, cols)
	}
}

// table fetches one object the way kubectl get does and returns the column
// names and the row's cells.
func table(t *testing.T, resource, name string) ([]string, []any) {
	t.Helper()
	cs := kubernetes.NewForConfigOrDie(env.Config(t))
	raw, err := cs.CoreV1().RESTClient().Get().AbsPath("/apis/tailscale.com/v1alpha1", resource, name).
		SetHeader("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io").DoRaw(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var tbl metav1.Table
	if err := json.Unmarshal(raw, &tbl); err != nil {
		t.Fatal(err)
	}
	if len(tbl.Rows) != 1 {
		t.Fatalf("table has %d rows, want 1", len(tbl.Rows))
	}
	var cols []string
	for _, c := range tbl.ColumnDefinitions {
		cols = append(cols, c.Name)
	}
	return cols, tbl.Rows[0].Cells
}

func TestProxyClassValidation(t *testing.T) {
	client := dynamicClient(t).Resource(v1alpha1.ProxyClassesResource)
	container := func(c map[string]any) map[string]any {
		return map[string]any{"statefulSet": map[string]any{"pod": map[string]any{"tailscaleContainer": c}}}
	}
	expectRefused(t, client, "ProxyClass", []refusal{
		{"monitor-without-metrics", "ServiceMonitor can only be enabled if metrics are enabled",
			map[string]any{"metrics": map[string]any{"enable": false, "serviceMonitor": map[string]any{"enable": true}}}},
		{"metrics-enable-required", "spec.metrics.enable: Required value", map[string]any{"metrics": map[string]any{}}},
		{"bad-label-value", "should match '^(([a-zA-Z0-9][-._a-zA-Z0-9]*)?[a-zA-Z0-9])?$'",
			map[string]any{"statefulSet": map[string]any{"labels": map[string]any{"team": "-x-"}}}},
		{"long-label-value", "Too long: may not be more than 63",
			map[string]any{"statefulSet": map[string]any{"pod": map[string]any{"labels": map[string]any{"team": strings.Repeat("a", 64)}}}}},
		{"bad-env-name", "should match '^[-._a-zA-Z][-._a-zA-Z0-9]*$'",
			container(map[string]any{"env": []any{map[string]any{"name": "1BAD", "value": "x"}}})},
		{"bad-pull-policy", `Unsupported value: "Sometimes"`, container(map[string]any{"imagePullPolicy": "Sometimes"})},
		{"bad-dns-policy", `Unsupported value: "Cloud"`,
			map[string]any{"statefulSet": map[string]any{"pod": map[string]any{"dnsPolicy": "Cloud"}}}},
		{"no-ports", "should have at least 1 items",
			map[string]any{"staticEndpoints": map[string]any{"nodePort": map[string]any{"ports": []any{}}}}},
		{"no-node-port", "spec.staticEndpoints.nodePort: Required value", map[string]any{"staticEndpoints": map[string]any{}}},
	})

	// A class using every part of the schema is accepted as written.
	full := map[string]any{
		"statefulSet": map[string]any{
			"labels":      map[string]any{"team": "net"},
			"annotations": map[string]any{"example.com/note": "any text"},
			"pod": map[string]any{
				"labels":       map[string]any{"team": "net"},
				"nodeSelector": map[string]any{"kubernetes.io/os": "linux"},
				"tolerations":  []any{map[string]any{"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}},
				"affinity": map[string]any{"nodeAffinity": map[string]any{"requiredDuringSchedulingIgnoredDuringExecution": map[string]any{
					"nodeSelectorTerms": []any{map[string]any{"matchExpressions": []any{map[string]any{"key": "zone", "operator": "In", "values": []any{"a"}}}}},
				}}},
				"priorityClassName": "high",
				"dnsPolicy":         "ClusterFirst",
				"imagePullSecrets":  []any{map[string]any{"name": "regcred"}},
				"securityContext":   map[string]any{"runAsNonRoot": true},
				"tailscaleContainer": map[string]any{
					"image": "ghcr.io/tailplane/tailplane-proxy:v1", "imagePullPolicy": "IfNotPresent",
					"env":       []any{map[string]any{"name": "EXTRA", "value": "1"}},
					"resources": map[string]any{"requests": map[string]any{"cpu": "10m", "memory": "32Mi"}},
					"debug":     map[string]any{"enable": true},
				},
			},
		},
		"metrics":                          map[string]any{"enable": true, "serviceMonitor": map[string]any{"enable": true, "labels": map[string]any{"release": "prom"}}},
		"tailscale":                        map[string]any{"acceptRoutes": true},
		"useLetsEncryptStagingEnvironment": true,
		"staticEndpoints":                  map[string]any{"nodePort": map[string]any{"ports": []any{map[string]any{"port": int64(30001), "endPort": int64(30010)}}}},
	}
	created := createOrFail(t, client, object("ProxyClass", "full", full))
	spec, _, _ := unstructured.NestedMap(created.Object, "spec")
	if a, b := mustJSON(t, spec), mustJSON(t, full); a != b {
		t.Errorf("stored spec differs from the one sent (fields pruned?):\n got %s\nwant %s", a, b)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
