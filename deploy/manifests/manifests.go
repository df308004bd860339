// Package manifests embeds the plain install manifests in this folder (the
// namespace, CRDs, RBAC, OAuth Secret placeholder, IngressClass and operator
// Deployment), so that tests and tools apply exactly what users apply with
// `kubectl apply -f deploy/manifests/`. The files are rendered from the Helm
// chart in deploy/chart (`go tool task manifests:render`), their one source;
// a test fails when they are out of date.
//
// It imports only Kubernetes' apimachinery.
package manifests

import (
	"bufio"
	"bytes"
	"embed"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"sort"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

//go:embed *.yaml
var files embed.FS

// Files returns the manifest files.
func Files() fs.FS { return files }

// Objects returns every object of the manifests, in file order (the file
// names' numeric prefixes order them so that each applies after what it
// needs).
func Objects() ([]*unstructured.Unstructured, error) {
	names, err := fs.Glob(files, "*.yaml")
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	var out []*unstructured.Unstructured
	for _, name := range names {
		b, err := files.ReadFile(name)
		if err != nil {
			return nil, err
		}
		r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(b)))
		for {
			doc, err := r.Read()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return nil, fmt.Errorf("manifests: read %s: %w", name, err)
			}
			obj := &unstructured.Unstructured{}
			if err := yaml.Unmarshal(doc, &obj.Object); err != nil {
				return nil, fmt.Errorf("manifests: parse %s: %w", name, err)
			}
			if len(obj.Object) == 0 {
				continue // a document holding only comments
			}
			out = append(out, obj)
		}
	}
	return out, nil
}
