package imagebuild_test

import (
	"archive/tar"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/tailplane/tailplane/deploy/images/internal/imagebuild"
)

// A prebuilt image holds every binary in BinDir with its bytes, runs the
// entrypoint and user it was given, and reads back from its layout.
func TestBuildPrebuilt(t *testing.T) {
	dir := t.TempDir()
	bins := map[string]string{"containerboot": "boot bytes", "tailscaled": "daemon bytes", "tailscale": "cli bytes"}
	var paths []string
	for _, n := range []string{"containerboot", "tailscaled", "tailscale"} {
		p := filepath.Join(dir, n)
		if err := os.WriteFile(p, []byte(bins[n]), 0o755); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	amd64 := v1.Platform{OS: "linux", Architecture: "amd64"}
	spec := imagebuild.Prebuilt{
		Name: "tailscale", Binaries: paths, User: "0:0", Platform: amd64, Version: "v1.102.5",
		SourceDate: time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC),
	}
	idx, err := imagebuild.BuildPrebuilt(spec)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "layout", "tailscale")
	if err := imagebuild.WriteLayout(out, idx, spec.Version); err != nil {
		t.Fatal(err)
	}
	back, err := imagebuild.ReadLayout(out)
	if err != nil {
		t.Fatal(err)
	}
	m, err := back.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Manifests) != 1 || m.Manifests[0].Platform == nil || m.Manifests[0].Platform.Architecture != "amd64" {
		t.Fatalf("index manifests %+v, want one linux/amd64 image", m.Manifests)
	}
	img, err := back.Image(m.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{imagebuild.BinDir + "/containerboot"}; !slices.Equal(cf.Config.Entrypoint, want) {
		t.Errorf("entrypoint %q, want %q (the first binary)", cf.Config.Entrypoint, want)
	}
	if cf.Config.User != "0:0" {
		t.Errorf("user %q, want 0:0", cf.Config.User)
	}
	if cf.Config.Labels["org.opencontainers.image.version"] != "v1.102.5" {
		t.Errorf("labels %v lack the version", cf.Config.Labels)
	}
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("layers %d, %v; want one", len(layers), err)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	got := map[string]string{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(tr)
		if dir, name := filepath.Split(h.Name); dir == "usr/local/bin/" && name != "" {
			got[name] = string(body)
			if h.Mode != 0o755 {
				t.Errorf("%s mode %o, want 755", h.Name, h.Mode)
			}
		}
	}
	for n, body := range bins {
		if got[n] != body {
			t.Errorf("layer's usr/local/bin/%s = %q, want %q", n, got[n], body)
		}
	}

	// The same binaries give the same digest (reproducible), another user another.
	again, err := imagebuild.BuildPrebuilt(spec)
	if err != nil {
		t.Fatal(err)
	}
	d1, _ := idx.Digest()
	d2, _ := again.Digest()
	if d1 != d2 {
		t.Errorf("two builds of the same binaries: %s and %s", d1, d2)
	}
	spec.User = ""
	nonroot, err := imagebuild.BuildPrebuilt(spec)
	if err != nil {
		t.Fatal(err)
	}
	if d3, _ := nonroot.Digest(); d3 == d1 {
		t.Error("the default user (65532) gave the same digest as 0:0")
	}
}

// Two binaries of one name would overwrite each other in BinDir.
func TestBuildPrebuiltRefusesDuplicateNames(t *testing.T) {
	a, b := filepath.Join(t.TempDir(), "x"), filepath.Join(t.TempDir(), "x")
	for _, p := range []string{a, b} {
		if err := os.WriteFile(p, []byte("x"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	_, err := imagebuild.BuildPrebuilt(imagebuild.Prebuilt{Name: "x", Binaries: []string{a, b}, Version: "v", Platform: v1.Platform{OS: "linux", Architecture: "amd64"}})
	if err == nil {
		t.Fatal("no error for two binaries named x")
	}
}
