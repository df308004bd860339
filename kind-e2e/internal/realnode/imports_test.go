package realnode

import (
	"archive/tar"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// writeLayout writes a minimal OCI layout as deploy/images does: one index
// entry whose ref name is the tag, and a blob.
func writeLayout(t *testing.T, dir, refName string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(dir, "blobs", "sha256"), 0o755); err != nil {
		t.Fatal(err)
	}
	entry := map[string]any{"mediaType": "application/vnd.oci.image.index.v1+json", "digest": "sha256:ab", "size": 2}
	if refName != "" {
		entry["annotations"] = map[string]string{refNameAnnotation: refName}
	}
	index, _ := json.Marshal(map[string]any{"schemaVersion": 2, "manifests": []any{entry}})
	for name, body := range map[string]string{"index.json": string(index), "oci-layout": `{"imageLayoutVersion":"1.0.0"}`, "blobs/sha256/ab": "{}"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestImportArchives: a folder of layouts (go run ./deploy/images build
// -out DIR) becomes one archive per layout, each entry named
// <repo>/<folder>:<tag>, with every file of the layout; an archive is
// passed as it is.
func TestImportArchives(t *testing.T) {
	src := t.TempDir()
	writeLayout(t, filepath.Join(src, "tailplane-operator"), "latest")
	writeLayout(t, filepath.Join(src, "tailplane-proxy"), "v1.2.3")
	if err := os.MkdirAll(filepath.Join(src, "not-a-layout"), 0o755); err != nil {
		t.Fatal(err)
	}
	one := filepath.Join(t.TempDir(), "mine")
	writeLayout(t, one, "example.com/x/mine:dev")
	tarball := filepath.Join(t.TempDir(), "saved.tar")
	if err := os.WriteFile(tarball, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	archives, names, err := importArchives([]Import{{Path: src}, {Path: one, Repo: "ignored.example"}, {Path: tarball}}, work)
	if err != nil {
		t.Fatal(err)
	}
	wantNames := []string{"ghcr.io/tailplane/tailplane-operator:latest", "ghcr.io/tailplane/tailplane-proxy:v1.2.3", "example.com/x/mine:dev"}
	if !slices.Equal(names, wantNames) {
		t.Errorf("names = %q, want %q", names, wantNames)
	}
	wantArchives := []string{filepath.Join(work, "tailplane-operator.tar"), filepath.Join(work, "tailplane-proxy.tar"), filepath.Join(work, "mine.tar"), tarball}
	if !slices.Equal(archives, wantArchives) {
		t.Fatalf("archives = %q, want %q", archives, wantArchives)
	}
	f, err := os.Open(archives[0])
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr := tar.NewReader(f)
	var files []string
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, h.Name)
		if h.Name == "index.json" {
			var idx struct {
				Manifests []struct {
					Annotations map[string]string `json:"annotations"`
				} `json:"manifests"`
			}
			if err := json.NewDecoder(tr).Decode(&idx); err != nil {
				t.Fatal(err)
			}
			if got := idx.Manifests[0].Annotations[imageNameAnnotation]; got != wantNames[0] {
				t.Errorf("index.json names the image %q, want %q", got, wantNames[0])
			}
		}
	}
	slices.Sort(files)
	if want := []string{"blobs/sha256/ab", "index.json", "oci-layout"}; !slices.Equal(files, want) {
		t.Errorf("archive files = %q, want %q", files, want)
	}

	if _, _, err := importArchives([]Import{{Path: filepath.Join(src, "not-a-layout")}}, work); err == nil {
		t.Error("a folder without layouts imported without an error")
	}
}
