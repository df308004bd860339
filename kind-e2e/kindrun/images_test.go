package main

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// writeTestLayout writes an OCI image layout shaped as deploy/images'
// WriteLayout writes it: index.json with one image index, its ref name the
// tag, whose one manifest is for linux/arch.
func writeTestLayout(t *testing.T, dir, tag, arch string) {
	t.Helper()
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	blobs := map[string][]byte{}
	put := func(b []byte) string { d := digestOf(b); blobs[d] = b; return d }
	layer := []byte("layer " + arch)
	config := []byte(`{"architecture":"` + arch + `","os":"linux"}`)
	manifest, _ := json.Marshal(map[string]any{"schemaVersion": 2, "mediaType": mediaManifest,
		"config": descriptor{MediaType: mediaConfig, Digest: put(config), Size: int64(len(config))},
		"layers": []descriptor{{MediaType: "application/vnd.oci.image.layer.v1.tar+gzip", Digest: put(layer), Size: int64(len(layer))}}})
	inner, _ := json.Marshal(index{SchemaVersion: 2, MediaType: mediaIndex, Manifests: []descriptor{
		{MediaType: mediaManifest, Digest: put(manifest), Size: int64(len(manifest)), Platform: &platform{Architecture: arch, OS: "linux"}}}})
	top, _ := json.Marshal(index{SchemaVersion: 2, Manifests: []descriptor{
		{MediaType: mediaIndex, Digest: put(inner), Size: int64(len(inner)), Annotations: map[string]string{refNameAnnotation: tag}}}})
	files := map[string][]byte{"oci-layout": []byte(`{"imageLayoutVersion":"1.0.0"}`), "index.json": top}
	for d, b := range blobs {
		files[blobPath(d)] = b
	}
	for name, b := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// readTar returns a tar's regular files.
func readTar(t *testing.T, b []byte) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	tr := tar.NewReader(bytes.NewReader(b))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			body, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			files[h.Name] = body
		}
	}
}

// archiveImageNames are the names containerd gives the images of an OCI
// archive (the io.containerd.image.name of each index.json entry).
func archiveImageNames(t *testing.T, archive []byte) []string {
	t.Helper()
	var top index
	if err := json.Unmarshal(readTar(t, archive)["index.json"], &top); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, m := range top.Manifests {
		names = append(names, m.Annotations[containerdNameAnnotation])
	}
	return names
}

func TestLayoutArchive(t *testing.T) {
	dir := t.TempDir()
	layout := filepath.Join(dir, "tailplane-proxy")
	writeTestLayout(t, layout, "kind-e2e", "amd64")
	out := filepath.Join(dir, "proxy.tar")
	if err := LayoutArchive(layout, ProxyRepo, "kind-e2e", "amd64", out); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	files := readTar(t, b)
	// Every file of the layout is there, unchanged but index.json.
	err = filepath.WalkDir(layout, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(layout, p)
		want, _ := os.ReadFile(p)
		if got, ok := files[filepath.ToSlash(rel)]; !ok {
			t.Errorf("%s missing from the archive", rel)
		} else if rel != "index.json" && !bytes.Equal(got, want) {
			t.Errorf("%s changed", rel)
		}
		delete(files, filepath.ToSlash(rel))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 0 {
		t.Errorf("extra files %v", files)
	}
	var top index
	if err := json.Unmarshal(readTar(t, b)["index.json"], &top); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{refNameAnnotation: "kind-e2e", containerdNameAnnotation: "ghcr.io/tailplane/tailplane-proxy:kind-e2e"}
	if len(top.Manifests) != 1 || !reflect.DeepEqual(top.Manifests[0].Annotations, want) || top.Manifests[0].MediaType != mediaIndex {
		t.Errorf("index.json %+v", top)
	}
}

func TestLayoutArchiveRefusals(t *testing.T) {
	dir := t.TempDir()
	layout := filepath.Join(dir, "tailplane-operator")
	writeTestLayout(t, layout, "latest", "amd64")
	out := filepath.Join(dir, "op.tar")
	if err := LayoutArchive(layout, OperatorRepo, "kind-e2e", "amd64", out); err == nil || !strings.Contains(err.Error(), `holds tag "latest", want "kind-e2e"`) {
		t.Errorf("wrong tag: %v", err)
	}
	if err := LayoutArchive(layout, OperatorRepo, "latest", "arm64", out); err == nil || !strings.Contains(err.Error(), "PLATFORMS=linux/arm64") {
		t.Errorf("wrong platform: %v", err)
	}
	if err := LayoutArchive(filepath.Join(dir, "none"), OperatorRepo, "latest", "amd64", out); err == nil || !strings.Contains(err.Error(), "go tool task images") {
		t.Errorf("no layout: %v", err)
	}
}

func TestEchoArchive(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "devcluster-echo")
	if err := os.WriteFile(bin, []byte("\x7fELF echo"), 0o755); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "echo.tar")
	if err := EchoArchive(bin, "arm64", EchoRefs, out); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	files := readTar(t, b)
	if got := archiveImageNames(t, b); !reflect.DeepEqual(got, []string{"ghcr.io/tailplane/echo:dev", "ghcr.io/tailplane/echo:latest"}) {
		t.Errorf("names %v", got)
	}
	var top index
	_ = json.Unmarshal(files["index.json"], &top)
	var manifest struct {
		Config descriptor
		Layers []descriptor
	}
	if err := json.Unmarshal(files[blobPath(top.Manifests[0].Digest)], &manifest); err != nil {
		t.Fatal(err)
	}
	var config struct {
		Architecture string
		Config       struct {
			Entrypoint []string
			User       string
		}
	}
	if err := json.Unmarshal(files[blobPath(manifest.Config.Digest)], &config); err != nil {
		t.Fatal(err)
	}
	if config.Architecture != "arm64" || config.Config.User != "65532:65532" || !reflect.DeepEqual(config.Config.Entrypoint, []string{"/usr/local/bin/devcluster-echo"}) {
		t.Errorf("config %+v", config)
	}
	layer := readTar(t, files[blobPath(manifest.Layers[0].Digest)])
	if string(layer["usr/local/bin/devcluster-echo"]) != "\x7fELF echo" || !strings.Contains(string(layer["etc/passwd"]), "nonroot:x:65532") {
		t.Errorf("layer files %v", layer)
	}
	// Every blob is stored under its digest.
	for name, body := range files {
		if strings.HasPrefix(name, "blobs/") && blobPath(digestOf(body)) != name {
			t.Errorf("%s holds %s", name, digestOf(body))
		}
	}
}
