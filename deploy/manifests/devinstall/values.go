package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"sigs.k8s.io/yaml"
)

// ValuesFile is the file of a devcluster folder whose chart values devinstall
// adds to its own, as `helm -f` would: go tool task e2e:kind writes it with
// the image tags it loaded into the kind node. A devcluster has none.
const ValuesFile = "values.yaml"

// folderValues reads dir/values.yaml; none when there is no such file.
func folderValues(dir string) (map[string]any, error) {
	b, err := os.ReadFile(filepath.Join(dir, ValuesFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var extra map[string]any
	if err := yaml.Unmarshal(b, &extra); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, ValuesFile), err)
	}
	return extra, nil
}

// mergeValues returns base with over's values in place of its own; maps
// merge key by key, as Helm coalesces a values file over the defaults.
func mergeValues(base, over map[string]any) map[string]any {
	out := make(map[string]any, len(base)+len(over))
	for k, v := range base {
		out[k] = v
	}
	for k, v := range over {
		if om, ok := v.(map[string]any); ok {
			if bm, ok := out[k].(map[string]any); ok {
				out[k] = mergeValues(bm, om)
				continue
			}
		}
		out[k] = v
	}
	return out
}
