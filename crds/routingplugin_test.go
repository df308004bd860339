package crds_test

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

	"github.com/tailplane/tailplane/crds"
)

var routingPlugins = crds.RoutingPluginsResource

func routingPluginClient(t *testing.T) (dynamic.ResourceInterface, string) {
	t.Helper()
	ns := env.Namespace(t)
	return installCRDs(t).Resource(routingPlugins).Namespace(ns), ns
}

func routingPlugin(name string, spec map[string]any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "tailplane.dev/v1alpha1",
		"kind":       "RoutingPlugin",
		"metadata":   map[string]any{"name": name},
		"spec":       spec,
	}}
}

func minimalSpec() map[string]any {
	return map[string]any{
		"module":  map[string]any{"secretKeyRef": map[string]any{"name": "mods", "key": "p.wasm"}},
		"targets": map[string]any{"selectors": []any{map[string]any{"kind": "Service", "matchLabels": map[string]any{"app": "web"}}}},
	}
}

// The documented example applies, and a minimal spec gets the defaults.
func TestRoutingPluginExampleAndDefaults(t *testing.T) {
	client, _ := routingPluginClient(t)
	ctx := context.Background()
	example := readManifest(t, "../plugins/examples/routingplugin.yaml")
	if _, err := client.Create(ctx, example, metav1.CreateOptions{}); err != nil {
		t.Fatalf("the example was refused: %v", err)
	}
	got, err := client.Create(ctx, routingPlugin("minimal", minimalSpec()), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	spec := got.Object["spec"].(map[string]any)
	for field, want := range map[string]any{"order": int64(0), "failurePolicy": "Closed", "timeout": "1s", "memoryLimit": "64Mi", "poolSize": int64(4)} {
		if spec[field] != want {
			t.Errorf("default %s = %v (%T), want %v", field, spec[field], spec[field], want)
		}
	}
	if got := spec["module"].(map[string]any)["maxSize"]; got != "64Mi" {
		t.Errorf("default module.maxSize = %v, want 64Mi", got)
	}
	// Registry and URL sources.
	for name, module := range map[string]map[string]any{
		"from-oci":   {"oci": map[string]any{"ref": "oci://ghcr.io/me/canary:v1", "pullPolicy": "Always", "imagePullSecret": "regcred"}},
		"from-https": {"https": map[string]any{"url": "https://example.com/canary.wasm"}, "sha256": strings.Repeat("c", 64), "maxSize": "128Mi"},
	} {
		spec := minimalSpec()
		spec["module"] = module
		if _, err := client.Create(ctx, routingPlugin(name, spec), metav1.CreateOptions{}); err != nil {
			t.Errorf("%s refused: %v", name, err)
		}
	}
}

// Invalid specs are refused with a message that says what is wrong.
func TestRoutingPluginValidation(t *testing.T) {
	client, _ := routingPluginClient(t)
	cases := []struct {
		name string
		edit func(spec map[string]any)
		msg  string
	}{
		{"both sources", func(s map[string]any) {
			s["module"].(map[string]any)["configMapKeyRef"] = map[string]any{"name": "c", "key": "k"}
		}, "module needs exactly one of oci, https, configMapKeyRef and secretKeyRef"},
		{"no source", func(s map[string]any) { s["module"] = map[string]any{"sha256": strings.Repeat("a", 64)} }, "module needs exactly one of oci, https, configMapKeyRef and secretKeyRef"},
		{"oci and secret", func(s map[string]any) {
			s["module"].(map[string]any)["oci"] = map[string]any{"ref": "ghcr.io/me/canary:v1"}
		}, "module needs exactly one of oci, https, configMapKeyRef and secretKeyRef"},
		{"https without sha256", func(s map[string]any) {
			s["module"] = map[string]any{"https": map[string]any{"url": "https://example.com/canary.wasm"}}
		}, "an https module needs sha256"},
		{"plain http", func(s map[string]any) {
			s["module"] = map[string]any{"https": map[string]any{"url": "http://example.com/canary.wasm"}, "sha256": strings.Repeat("a", 64)}
		}, "spec.module.https.url"},
		{"pull policy", func(s map[string]any) {
			s["module"] = map[string]any{"oci": map[string]any{"ref": "ghcr.io/me/canary:v1", "pullPolicy": "Never"}}
		}, `supported values: "IfNotPresent", "Always"`},
		{"max size too large", func(s map[string]any) { s["module"].(map[string]any)["maxSize"] = "2Gi" }, "maxSize must be a quantity from 1Ki to 1Gi"},
		{"bad sha256", func(s map[string]any) { s["module"].(map[string]any)["sha256"] = "ABC" }, "spec.module.sha256"},
		{"bad policy", func(s map[string]any) { s["failurePolicy"] = "Sometimes" }, `supported values: "Open", "Closed"`},
		{"unknown capability", func(s map[string]any) { s["capabilities"] = []any{"route", "filesystem"} }, `supported values: "route", "identity", "funnel"`},
		{"timeout too long", func(s map[string]any) { s["timeout"] = "30s" }, "timeout must be more than 0s and at most 10s"},
		{"timeout not a duration", func(s map[string]any) { s["timeout"] = "forever" }, "spec.timeout"},
		{"memory too small", func(s map[string]any) { s["memoryLimit"] = "1Mi" }, "memoryLimit must be a quantity from 4Mi to 4Gi"},
		{"no targets", func(s map[string]any) { s["targets"] = map[string]any{"targetRefs": []any{}} }, "targets needs at least one targetRef or selector"},
		{"target kind", func(s map[string]any) {
			s["targets"] = map[string]any{"targetRefs": []any{map[string]any{"kind": "Pod", "name": "x"}}}
		}, `supported values: "Ingress", "Service"`},
		{"empty selector", func(s map[string]any) {
			s["targets"] = map[string]any{"selectors": []any{map[string]any{"kind": "Ingress"}}}
		}, "a selector needs matchLabels or matchExpressions"},
		{"pool too large", func(s map[string]any) { s["poolSize"] = int64(1000) }, "spec.poolSize"},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			spec := minimalSpec()
			c.edit(spec)
			_, err := client.Create(context.Background(), routingPlugin(strings.ReplaceAll(c.name, " ", "-")+string(rune('a'+i)), spec), metav1.CreateOptions{})
			if err == nil || !strings.Contains(err.Error(), c.msg) {
				t.Fatalf("got %v, want an error containing %q", err, c.msg)
			}
		})
	}
}

// The status subresource holds conditions, the module digest and size, and
// the proxies that loaded it.
func TestRoutingPluginStatus(t *testing.T) {
	client, _ := routingPluginClient(t)
	ctx := context.Background()
	obj, err := client.Create(ctx, routingPlugin("with-status", minimalSpec()), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC().Format(time.RFC3339)
	obj.Object["status"] = map[string]any{
		"observedGeneration": int64(1),
		"sha256":             strings.Repeat("b", 64),
		"size":               int64(1875182),
		"source":             "oci://ghcr.io/me/canary:v1",
		"chunks":             int64(3),
		"conditions": []any{
			map[string]any{"type": "Accepted", "status": "True", "reason": "ModuleCompiled", "message": "compiled in 812ms", "lastTransitionTime": now},
			map[string]any{"type": "Ready", "status": "False", "reason": "LoadFailed", "message": "1 of 2 proxies failed", "lastTransitionTime": now},
			map[string]any{"type": "Degraded", "status": "True", "reason": "RequestsFailing", "message": "120 of 120 requests failed (100%)", "lastTransitionTime": now},
		},
		"loadedBy": []any{
			map[string]any{"proxy": "ts-web-0", "sha256": strings.Repeat("b", 64), "failures": map[string]any{
				"since": now, "requests": int64(1200), "failed": int64(120), "byClass": map[string]any{"trap": int64(120)},
				"windowSeconds": int64(60), "recentRequests": int64(120), "recentFailed": int64(120),
				"lastError": "plugin apps/canary: handle_request: wasm error: unreachable (guest: panic: boom)", "lastFailureTime": now}},
			map[string]any{"proxy": "ts-web-1", "error": "sha256 mismatch"},
		},
	}
	got, err := client.UpdateStatus(ctx, obj, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if loaded, _, _ := unstructured.NestedSlice(got.Object, "status", "loadedBy"); len(loaded) != 2 {
		t.Errorf("loadedBy = %v", loaded)
	}
	if loaded, _, _ := unstructured.NestedSlice(got.Object, "status", "loadedBy"); len(loaded) == 2 {
		if f, _, _ := unstructured.NestedMap(loaded[0].(map[string]any), "failures"); len(f) != 9 {
			t.Errorf("loadedBy[0].failures = %v, want all 9 fields kept", f)
		}
	}
	if n, _, _ := unstructured.NestedInt64(got.Object, "status", "chunks"); n != 3 {
		t.Errorf("status.chunks = %d, want 3 (not pruned)", n)
	}
}

// Every field has a description, so `kubectl explain routingplugin.spec...`
// documents the whole kind.
func TestRoutingPluginExplainable(t *testing.T) {
	objs, err := crds.Objects()
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if o.GetName() != "routingplugins.tailplane.dev" {
			continue
		}
		versions, _, _ := unstructured.NestedSlice(o.Object, "spec", "versions")
		s, _, _ := unstructured.NestedMap(versions[0].(map[string]any), "schema", "openAPIV3Schema")
		var walk func(path string, s map[string]any)
		walk = func(path string, s map[string]any) {
			props, _ := s["properties"].(map[string]any)
			for name, p := range props {
				p := p.(map[string]any)
				if name != "metadata" && p["description"] == nil {
					t.Errorf("%s.%s has no description", path, name)
				}
				walk(path+"."+name, p)
				if items, ok := p["items"].(map[string]any); ok {
					walk(path+"."+name+"[]", items)
				}
			}
		}
		walk("RoutingPlugin", s)
		return
	}
	t.Fatal("routingplugins.tailplane.dev not found")
}
