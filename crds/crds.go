package crds

import (
	"embed"
	"fmt"
	"io/fs"
	"sort"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"
)

//go:embed *.yaml
var files embed.FS

// Files returns the CRD YAML files, as users install them.
func Files() fs.FS { return files }

// Objects returns every CustomResourceDefinition in this folder, sorted by
// file name.
func Objects() ([]*unstructured.Unstructured, error) {
	names, err := fs.Glob(files, "*.yaml")
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	out := make([]*unstructured.Unstructured, 0, len(names))
	for _, name := range names {
		b, err := files.ReadFile(name)
		if err != nil {
			return nil, err
		}
		obj := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(b, &obj.Object); err != nil {
			return nil, fmt.Errorf("crds: parse %s: %w", name, err)
		}
		if obj.GetKind() != "CustomResourceDefinition" {
			return nil, fmt.Errorf("crds: %s holds a %s, want a CustomResourceDefinition", name, obj.GetKind())
		}
		out = append(out, obj)
	}
	return out, nil
}

// RoutingPluginsResource is Tailplane's own RoutingPlugin kind
// (tailplane.dev_routingplugins.yaml), for dynamic clients; the
// tailscale.com kinds are in tailscale/v1alpha1.
var RoutingPluginsResource = schema.GroupVersionResource{Group: "tailplane.dev", Version: "v1alpha1", Resource: "routingplugins"}
