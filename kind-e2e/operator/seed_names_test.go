package operator

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/yaml"
)

// The seed's examples can be applied together: no two of them define the
// same object (kind, namespace, name), which would silently replace one
// with the other. The story names both L3 Services `postgres`; 02 is
// renamed (see examples/seed/README.md).
func TestSeedExamplesDoNotOverlap(t *testing.T) {
	files, err := filepath.Glob("../../examples/seed/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no seed examples: %v", err)
	}
	seen := map[string]string{}
	for _, f := range files {
		r, err := os.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		dec := yaml.NewYAMLOrJSONDecoder(r, 4096)
		for {
			var obj metav1.PartialObjectMetadata
			if err := dec.Decode(&obj); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			if obj.Kind == "" {
				continue
			}
			ns := obj.Namespace
			if ns == "" {
				ns = "default"
			}
			id := obj.Kind + " " + ns + "/" + obj.Name
			if other, dup := seen[id]; dup {
				t.Errorf("%s and %s both define %s", filepath.Base(other), filepath.Base(f), id)
			}
			seen[id] = f
		}
		r.Close()
	}
}
