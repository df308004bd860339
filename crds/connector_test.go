package crds_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	"github.com/tailplane/tailplane/crds"
	"github.com/tailplane/tailplane/internal/testenv"
)

var env = testenv.New()

func TestMain(m *testing.M) { os.Exit(env.Run(m)) }

var connectors = schema.GroupVersionResource{Group: "tailscale.com", Version: "v1alpha1", Resource: "connectors"}

// installCRDs installs every CRD of this folder and returns a client.
func installCRDs(t *testing.T) dynamic.Interface {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dyn := dynamic.NewForConfigOrDie(env.Config(t))
	objs, err := crds.Objects()
	if err != nil {
		t.Fatal(err)
	}
	if err := testenv.InstallCRDs(ctx, dyn, objs...); err != nil {
		t.Fatal(err)
	}
	return dyn
}

func setup(t *testing.T) dynamic.ResourceInterface {
	t.Helper()
	return installCRDs(t).Resource(connectors)
}

func readManifest(t *testing.T, path string) *unstructured.Unstructured {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	obj := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(b, &obj.Object); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return obj
}

// The seed's Connector manifests are the contract: they must apply unchanged.
func TestSeedConnectorsApply(t *testing.T) {
	client := setup(t)
	paths, _ := filepath.Glob("../examples/seed/*-connector-*.yaml")
	if len(paths) != 3 {
		t.Fatalf("found %d seed Connector manifests, want 3", len(paths))
	}
	for _, p := range paths {
		obj := readManifest(t, p)
		t.Cleanup(func() { _ = client.Delete(context.Background(), obj.GetName(), metav1.DeleteOptions{}) })
		if _, err := client.Create(context.Background(), obj, metav1.CreateOptions{}); err != nil {
			t.Errorf("%s was refused: %v", filepath.Base(p), err)
		}
	}
}

func connector(name string, spec map[string]any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "tailscale.com/v1alpha1",
		"kind":       "Connector",
		"metadata":   map[string]any{"name": name},
		"spec":       spec,
	}}
}

// Invalid combinations are refused by the CRD's CEL rules, with the official
// operator's messages.
func TestConnectorValidation(t *testing.T) {
	client := setup(t)
	routes := map[string]any{"advertiseRoutes": []any{"10.42.0.0/16"}}
	cases := []struct {
		name, want string
		spec       map[string]any
	}{
		{"app-and-subnet", "The appConnector field is mutually exclusive with exitNode and subnetRouter fields.",
			map[string]any{"appConnector": map[string]any{}, "subnetRouter": routes}},
		{"app-and-exit", "The appConnector field is mutually exclusive with exitNode and subnetRouter fields.",
			map[string]any{"appConnector": map[string]any{}, "exitNode": true}},
		{"hostname-replicas", "The hostname field cannot be specified when replicas is greater than 1.",
			map[string]any{"exitNode": true, "hostname": "exit", "replicas": int64(2)}},
		{"hostname-and-prefix", "The hostname and hostnamePrefix fields are mutually exclusive.",
			map[string]any{"exitNode": true, "hostname": "exit", "hostnamePrefix": "exit"}},
		{"nothing", "A Connector needs to have at least one of exit node, subnet router or app connector configured.",
			map[string]any{"exitNode": false}},
		{"bad-tag", `should match '^tag:[a-zA-Z][a-zA-Z0-9-]*$'`,
			map[string]any{"exitNode": true, "tags": []any{"k8s"}}},
		{"bad-cidr", "must be of type cidr",
			map[string]any{"subnetRouter": map[string]any{"advertiseRoutes": []any{"10.42.0.0/33"}}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := client.Create(context.Background(), connector("invalid-"+tc.name, tc.spec), metav1.CreateOptions{})
			if err == nil {
				_ = client.Delete(context.Background(), "invalid-"+tc.name, metav1.DeleteOptions{})
				t.Fatalf("accepted; want refusal with %q", tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("refused with %q; want %q", err, tc.want)
			}
		})
	}

	// A valid single-replica hostname is fine, and tailnet cannot change later.
	obj := connector("tailnet-immutable", map[string]any{"exitNode": true, "hostname": "exit", "tailnet": "a"})
	created, err := client.Create(context.Background(), obj, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Delete(context.Background(), obj.GetName(), metav1.DeleteOptions{}) })
	_ = unstructured.SetNestedField(created.Object, "b", "spec", "tailnet")
	if _, err := client.Update(context.Background(), created, metav1.UpdateOptions{}); err == nil || !strings.Contains(err.Error(), "Connector tailnet is immutable") {
		t.Fatalf("changing spec.tailnet: got %v, want %q", err, "Connector tailnet is immutable")
	}
}
