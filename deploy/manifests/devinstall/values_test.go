package main

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// go tool task e2e:kind's values.yaml replaces the image tags and keeps
// devinstall's own values.
func TestFolderValues(t *testing.T) {
	dir := t.TempDir()
	base := map[string]any{
		"oauth":          map[string]any{"clientId": "id", "clientSecret": "secret"},
		"operatorConfig": map[string]any{"logging": "dev"},
		"proxyConfig":    map[string]any{"defaultProxyClass": ProxyClassName},
	}
	extra, err := folderValues(dir)
	if got := mergeValues(base, extra); err != nil || !reflect.DeepEqual(got, base) {
		t.Fatalf("without values.yaml: %v %v", got, err)
	}
	yaml := `# Written by go tool task e2e:kind
operatorConfig:
  image: {repository: ghcr.io/tailplane/tailplane-operator, tag: kind-e2e, pullPolicy: IfNotPresent}
proxyConfig:
  image: {repository: ghcr.io/tailplane/tailplane-proxy, tag: kind-e2e}
`
	if err := os.WriteFile(filepath.Join(dir, ValuesFile), []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	extra, err = folderValues(dir)
	if err != nil {
		t.Fatal(err)
	}
	got := mergeValues(base, extra)
	want := map[string]any{
		"oauth": map[string]any{"clientId": "id", "clientSecret": "secret"},
		"operatorConfig": map[string]any{"logging": "dev",
			"image": map[string]any{"repository": "ghcr.io/tailplane/tailplane-operator", "tag": "kind-e2e", "pullPolicy": "IfNotPresent"}},
		"proxyConfig": map[string]any{"defaultProxyClass": ProxyClassName,
			"image": map[string]any{"repository": "ghcr.io/tailplane/tailplane-proxy", "tag": "kind-e2e"}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("values %v\nwant %v", got, want)
	}
	if err := os.WriteFile(filepath.Join(dir, ValuesFile), []byte("operatorConfig: [\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := folderValues(dir); err == nil {
		t.Error("a broken values.yaml: no error")
	}
}
