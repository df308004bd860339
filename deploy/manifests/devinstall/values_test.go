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

// devcluster's ACME server reaches every device through the chart's values
// (proxyConfig.acmeDirectoryURL, acmeCAFile: the CA as a pod reads it), not
// through the default ProxyClass, which sets nothing and so earns no
// CustomTSEnvVar Warning.
func TestChartValuesCarryTheACMEServer(t *testing.T) {
	env := map[string]string{
		"TS_API_CLIENT_ID": "id", "TS_API_CLIENT_SECRET": "secret", "TS_CONTROL_URL": "http://127.0.0.1:4000",
		"TS_DEBUG_ACME_DIRECTORY_URL": "https://127.0.0.1:14000/dir", "TS_ACME_CA_FILE": "/tmp/devcluster-x/acme-ca.pem",
		"TS_POD_ACME_CA_FILE": "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt",
	}
	want := map[string]any{
		"oauth":          map[string]any{"clientId": "id", "clientSecret": "secret"},
		"loginServer":    "http://127.0.0.1:4000",
		"operatorConfig": map[string]any{"logging": "dev"},
		"proxyConfig": map[string]any{"defaultProxyClass": ProxyClassName,
			"acmeDirectoryURL": "https://127.0.0.1:14000/dir", "acmeCAFile": "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt"},
	}
	if got := chartValues(env); !reflect.DeepEqual(got, want) {
		t.Errorf("values %v\nwant %v", got, want)
	}
	// An older devcluster's tailnet.env: the one CA file there is.
	delete(env, "TS_POD_ACME_CA_FILE")
	if got := chartValues(env)["proxyConfig"].(map[string]any)["acmeCAFile"]; got != "/tmp/devcluster-x/acme-ca.pem" {
		t.Errorf("acmeCAFile without TS_POD_ACME_CA_FILE: %v", got)
	}
	// A plain-HTTP directory: no CA file.
	env["TS_DEBUG_ACME_DIRECTORY_URL"] = "http://198.19.0.1:14000/dir"
	proxy := chartValues(env)["proxyConfig"].(map[string]any)
	if _, ok := proxy["acmeCAFile"]; ok || proxy["acmeDirectoryURL"] != "http://198.19.0.1:14000/dir" {
		t.Errorf("plain-HTTP directory: %v", proxy)
	}
	// Headscale: its API key instead of the OAuth client, the same ACME server.
	env["TS_CONTROL"], env["HEADSCALE_URL"], env["HEADSCALE_API_KEY"] = "headscale", "http://127.0.0.1:8080", "key"
	got := chartValues(env)
	if _, ok := got["oauth"]; ok || got["loginServer"] != "" || got["proxyConfig"].(map[string]any)["acmeDirectoryURL"] == nil {
		t.Errorf("headscale values %v", got)
	}

	pc := defaultProxyClass()
	if pc.GetName() != ProxyClassName || !reflect.DeepEqual(pc.Object["spec"], map[string]any{}) {
		t.Errorf("default ProxyClass %v: want an empty spec", pc.Object)
	}
}
