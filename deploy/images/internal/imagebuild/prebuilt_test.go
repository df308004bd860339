package imagebuild_test

import (
	"archive/tar"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
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
	got := map[string]string{}
	for _, e := range layerEntries(t, img) {
		if dir, name := filepath.Split(e.Name); dir == "usr/local/bin/" && name != "" {
			got[name] = e.body
			if e.Mode != 0o755 {
				t.Errorf("%s mode %o, want 755", e.Name, e.Mode)
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

// Extra files land at their paths with the folders that hold them, links
// as links, and the image's PATH is the one given: what the official proxy
// image needs for its init container's /bin/sh -c "sysctl -w ...".
func TestBuildPrebuiltExtraFiles(t *testing.T) {
	dir := t.TempDir()
	bin, busybox := filepath.Join(dir, "containerboot"), filepath.Join(dir, "busybox")
	for p, body := range map[string]string{bin: "boot bytes", busybox: "busybox bytes"} {
		if err := os.WriteFile(p, []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	const path = "/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
	idx, err := imagebuild.BuildPrebuilt(imagebuild.Prebuilt{
		Name: "tailscale", Binaries: []string{bin}, Version: "v", Platform: v1.Platform{OS: "linux", Architecture: "amd64"},
		Extra: []imagebuild.ExtraFile{
			{Path: "/bin/busybox", Source: busybox},
			{Path: "/bin/sh", Link: "busybox"},
			{Path: "/sbin/sysctl", Link: "/bin/busybox"},
		},
		Path: path,
	})
	if err != nil {
		t.Fatal(err)
	}
	m, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	img, err := idx.Image(m.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(cf.Config.Env, []string{"PATH=" + path}) {
		t.Errorf("env %q, want PATH=%s", cf.Config.Env, path)
	}
	var names []string
	got := map[string]*tar.Header{}
	bodies := map[string]string{}
	for _, e := range layerEntries(t, img) {
		names, got[e.Name], bodies[e.Name] = append(names, e.Name), e.Header, e.body
	}
	if h := got["bin/busybox"]; h == nil || h.Typeflag != tar.TypeReg || h.Mode != 0o755 || bodies["bin/busybox"] != "busybox bytes" {
		t.Errorf("bin/busybox: %+v, body %q; want the file, mode 755", h, bodies["bin/busybox"])
	}
	for name, target := range map[string]string{"bin/sh": "busybox", "sbin/sysctl": "/bin/busybox"} {
		if h := got[name]; h == nil || h.Typeflag != tar.TypeSymlink || h.Linkname != target {
			t.Errorf("%s: %+v, want a link to %s", name, h, target)
		}
	}
	// Each folder comes before what it holds (a tar extractor creates it
	// with its mode), and only once.
	for _, d := range []string{"bin/", "sbin/"} {
		i := slices.Index(names, d)
		if i < 0 || got[d].Typeflag != tar.TypeDir || i > slices.IndexFunc(names, func(n string) bool { return n != d && filepath.Dir(n)+"/" == d }) {
			t.Errorf("folder %s missing or after its files: %q", d, names)
		}
	}
	if slices.Index(names, "usr/local/bin/containerboot") < 0 {
		t.Errorf("the binary is missing: %q", names)
	}
}

// Extra files are refused when they cannot be placed.
func TestBuildPrebuiltRefusesBadExtraFiles(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "tailscaled")
	if err := os.WriteFile(bin, []byte("x"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		extra imagebuild.ExtraFile
		want  string
	}{
		{imagebuild.ExtraFile{Path: "bin/sh", Link: "busybox"}, "want an absolute path"},
		{imagebuild.ExtraFile{Path: "/bin/sh", Link: "busybox", Source: bin}, "give a source or a link target"},
		{imagebuild.ExtraFile{Path: "/bin/sh"}, "give a source or a link target"},
		{imagebuild.ExtraFile{Path: imagebuild.BinDir + "/tailscaled", Link: "x"}, "two files at"},
		{imagebuild.ExtraFile{Path: "/bin/busybox", Source: filepath.Join(t.TempDir(), "missing")}, "no such file"},
	} {
		_, err := imagebuild.BuildPrebuilt(imagebuild.Prebuilt{Name: "x", Binaries: []string{bin}, Version: "v",
			Platform: v1.Platform{OS: "linux", Architecture: "amd64"}, Extra: []imagebuild.ExtraFile{tc.extra}})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: error %v, want %q", tc.extra, err, tc.want)
		}
	}
}

// layerEntry is one entry of an image's layer with its body.
type layerEntry struct {
	*tar.Header
	body string
}

// layerEntries reads the one layer of img, in order.
func layerEntries(t *testing.T, img v1.Image) []layerEntry {
	t.Helper()
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("layers %d, %v; want one", len(layers), err)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	var out []layerEntry
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(tr)
		out = append(out, layerEntry{Header: h, body: string(body)})
	}
}
