package official

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// ReleaseChart copies the official chart at dir into out and adds the
// tailscale.com CRDs of the module (cmd/k8s-operator/deploy/crds) to its
// templates behind `installCRDs`, as the official release process does
// (cmd/k8s-operator/generate, "helmcrd"): the chart then installs and
// uninstalls the CRDs with the release, as the published chart does. It
// returns the names of the CRDs.
func ReleaseChart(dir, out string) ([]string, error) {
	if err := os.RemoveAll(out); err != nil {
		return nil, err
	}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(out, rel), 0o755)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(out, rel), b, 0o644)
	})
	if err != nil {
		return nil, fmt.Errorf("copy the official chart: %w", err)
	}
	crdDir := filepath.Join(filepath.Dir(dir), "crds")
	files, err := filepath.Glob(filepath.Join(crdDir, "tailscale.com_*.yaml"))
	if err != nil || len(files) == 0 {
		return nil, fmt.Errorf("no CRDs in %s (%v)", crdDir, err)
	}
	var names []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		kind := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(f), "tailscale.com_"), ".yaml")
		names = append(names, kind+".tailscale.com")
		tmpl := "{{ if .Values.installCRDs -}}\n" + string(b) + "{{- end -}}"
		if err := os.WriteFile(filepath.Join(out, "templates", "crd-"+kind+".yaml"), []byte(tmpl), 0o644); err != nil {
			return nil, err
		}
	}
	return names, nil
}
