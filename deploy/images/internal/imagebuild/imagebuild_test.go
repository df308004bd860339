package imagebuild_test

import (
	"archive/tar"
	"context"
	"errors"
	"io"
	stdlog "log"
	"net"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/log"
	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/tailplane/tailplane/deploy/images/internal/imagebuild"
)

// testPlatforms are the platforms the test builds: this machine's by default
// (its binary is run), or TAILPLANE_IMAGES_TEST_PLATFORMS (e.g.
// linux/amd64,linux/arm64) for the full set, at the cost of a cross-compile.
func testPlatforms(t *testing.T) []v1.Platform {
	t.Helper()
	s := os.Getenv("TAILPLANE_IMAGES_TEST_PLATFORMS")
	if s == "" {
		s = "linux/" + runtime.GOARCH
	}
	ps, err := imagebuild.ParsePlatforms(s)
	if err != nil {
		t.Fatal(err)
	}
	return ps
}

func moduleDir(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		t.Fatalf("go env GOMOD: %v", err)
	}
	return filepath.Dir(strings.TrimSpace(string(out)))
}

// sourceDate is a fixed date, so that the digests depend only on the source.
var sourceDate = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

func buildOptions(t *testing.T) imagebuild.Options {
	return imagebuild.Options{
		ModuleDir:  moduleDir(t),
		Platforms:  testPlatforms(t),
		Version:    "test",
		Revision:   "0123456789abcdef0123456789abcdef01234567",
		SourceDate: sourceDate,
		Logger:     log.New(io.Discard),
	}
}

// startRegistry serves go-containerregistry's in-memory registry over HTTP
// on loopback and returns its host:port.
func startRegistry(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(registry.New(registry.Logger(stdlog.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

// TestImages builds both images once, pushes them to a registry, pulls them
// back through the registry API and checks what a node would run.
func TestImages(t *testing.T) {
	// A bound against a hung build, not a speed target: the images' -trimpath,
	// CGO_ENABLED=0 builds share no cache with the rest, and with empty caches
	// on a busy 2-core machine both platforms took more than 10 minutes.
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Minute)
	defer cancel()
	opts := buildOptions(t)
	sourceBefore := sourceState(t, opts.ModuleDir)
	built, err := imagebuild.Build(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	if len(built) != 2 {
		t.Fatalf("built %d images, want 2", len(built))
	}
	host := startRegistry(t)
	push := imagebuild.PushOptions{Registry: host + "/tailplane", Tag: "test", Keychain: authn.NewMultiKeychain()}

	for _, b := range built {
		t.Run(b.Command.Name, func(t *testing.T) {
			ref, err := imagebuild.Push(ctx, b.Index, b.Command.Name, push)
			if err != nil {
				t.Fatal(err)
			}
			want, _ := b.Index.Digest()
			if ref.DigestStr() != want.String() || ref.Context().Name() != host+"/tailplane/"+b.Command.Name {
				t.Fatalf("pushed %s, want %s/tailplane/%s@%s", ref, host, b.Command.Name, want)
			}
			tag, err := name.NewTag(host + "/tailplane/" + b.Command.Name + ":test")
			if err != nil {
				t.Fatal(err)
			}
			checkPulled(ctx, t, tag, b.Command, opts)
		})
	}

	t.Run("reproducible", func(t *testing.T) {
		// Builds from the same source must match. When the checkout changed
		// between two builds (someone committed or edited a file meanwhile,
		// which happens on shared development machines, never in CI), the
		// pair proves nothing and is built again.
		first, before := built, sourceBefore
		for attempt := 1; ; attempt++ {
			second, err := imagebuild.Build(ctx, opts)
			if err != nil {
				t.Fatal(err)
			}
			if after := sourceState(t, opts.ModuleDir); after != before {
				if attempt == 3 {
					t.Fatalf("the source kept changing during %d build pairs", attempt)
				}
				t.Logf("the source changed between two builds; building the pair again")
				before = after
				if first, err = imagebuild.Build(ctx, opts); err != nil {
					t.Fatal(err)
				}
				continue
			}
			for i, b := range first {
				d1, _ := b.Index.Digest()
				d2, _ := second[i].Index.Digest()
				if d1 != d2 {
					t.Errorf("%s: built twice from the same source, digests %s and %s", b.Command.Name, d1, d2)
				}
			}
			return
		}
	})

	t.Run("layout round trip", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "tailplane-proxy")
		idx := built[1].Index
		if err := imagebuild.WriteLayout(dir, idx, "test"); err != nil {
			t.Fatal(err)
		}
		back, err := imagebuild.ReadLayout(dir)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := idx.Digest()
		got, _ := back.Digest()
		if got != want {
			t.Fatalf("layout holds %s, built %s", got, want)
		}
		sizes, err := imagebuild.Sizes(back)
		if err != nil || len(sizes) != len(opts.Platforms) || sizes[0].Bytes < 1<<20 {
			t.Fatalf("sizes %+v, %v", sizes, err)
		}
	})

	t.Run("bad registry", func(t *testing.T) {
		idx := built[0].Index
		for _, tc := range []struct{ registry, want string }{
			{"Not A/Registry", `registry "Not A/Registry" is not a valid registry/prefix`},
			{"https://ghcr.io/me", "without a scheme"},
			{"", "no registry given"},
		} {
			_, err := imagebuild.Push(ctx, idx, "tailplane-operator", imagebuild.PushOptions{Registry: tc.registry, Tag: "test", Keychain: authn.NewMultiKeychain()})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("registry %q: error %v, want it to say %q", tc.registry, err, tc.want)
			}
		}
		// A registry name that never resolves (.invalid is reserved).
		dnsCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		_, err := imagebuild.Push(dnsCtx, idx, "tailplane-operator", imagebuild.PushOptions{Registry: "registry.invalid/me", Tag: "test", Keychain: authn.NewMultiKeychain()})
		if want := "push tailplane-operator to registry.invalid/me/tailplane-operator:test"; err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("unknown registry host: error %v, want %q", err, want)
		}
		// A port nothing listens on.
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		closed := l.Addr().String()
		l.Close()
		_, err = imagebuild.Push(ctx, idx, "tailplane-operator", imagebuild.PushOptions{Registry: closed + "/tailplane", Tag: "test", Keychain: authn.NewMultiKeychain()})
		want := "push tailplane-operator to " + closed + "/tailplane/tailplane-operator:test"
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "connection refused") {
			t.Errorf("unreachable registry: error %v, want %q and connection refused", err, want)
		}
	})
}

// checkPulled pulls the index by tag and each image by digest and checks
// platforms, config and layer, then runs the binary of this machine's
// platform.
func checkPulled(ctx context.Context, t *testing.T, ref name.Reference, c imagebuild.Command, opts imagebuild.Options) {
	t.Helper()
	idx, err := remote.Index(ref, remote.WithContext(ctx))
	if err != nil {
		t.Fatalf("pull %s: %v", ref, err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if mt, _ := idx.MediaType(); mt != types.OCIImageIndex {
		t.Errorf("index media type %s, want %s", mt, types.OCIImageIndex)
	}
	if got := im.Annotations["org.opencontainers.image.source"]; got != imagebuild.DefaultSource {
		t.Errorf("index source annotation %q", got)
	}
	var platforms []string
	for _, d := range im.Manifests {
		if d.Platform == nil {
			t.Fatalf("manifest %s has no platform", d.Digest)
		}
		platforms = append(platforms, d.Platform.String())
		img, err := remote.Image(ref.Context().Digest(d.Digest.String()), remote.WithContext(ctx))
		if err != nil {
			t.Fatalf("pull %s@%s: %v", ref.Context(), d.Digest, err)
		}
		checkImage(ctx, t, img, *d.Platform, c, opts)
	}
	var want []string
	for _, p := range opts.Platforms {
		want = append(want, p.String())
	}
	if !slices.Equal(platforms, want) {
		t.Errorf("index platforms %v, want %v", platforms, want)
	}
}

func checkImage(ctx context.Context, t *testing.T, img v1.Image, p v1.Platform, c imagebuild.Command, opts imagebuild.Options) {
	t.Helper()
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cf.OS != p.OS || cf.Architecture != p.Architecture || cf.Variant != p.Variant {
		t.Errorf("config platform %s/%s/%s, index says %s", cf.OS, cf.Architecture, cf.Variant, p)
	}
	uid, gid, _ := strings.Cut(cf.Config.User, ":")
	if n, err := strconv.Atoi(uid); err != nil || n == 0 || uid != "65532" || gid != "65532" {
		t.Errorf("config user %q, want non-root 65532:65532", cf.Config.User)
	}
	entry := "/usr/local/bin/" + c.Name
	if !slices.Equal(cf.Config.Entrypoint, []string{entry}) || cf.Config.WorkingDir != "/" {
		t.Errorf("entrypoint %q, working dir %q", cf.Config.Entrypoint, cf.Config.WorkingDir)
	}
	if !cf.Created.Time.Equal(sourceDate) {
		t.Errorf("created %s, want the source date %s", cf.Created.Time, sourceDate)
	}
	for k, v := range map[string]string{
		"org.opencontainers.image.title":    c.Name,
		"org.opencontainers.image.version":  opts.Version,
		"org.opencontainers.image.revision": opts.Revision,
		"org.opencontainers.image.source":   imagebuild.DefaultSource,
	} {
		if cf.Config.Labels[k] != v {
			t.Errorf("label %s = %q, want %q", k, cf.Config.Labels[k], v)
		}
	}
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("%d layers (%v), want 1", len(layers), err)
	}
	if mt, _ := layers[0].MediaType(); mt != types.OCILayer {
		t.Errorf("layer media type %s, want %s", mt, types.OCILayer)
	}
	files, binary := readLayer(t, layers[0], entry)
	if want := []string{"etc/", "etc/group", "etc/passwd", "tmp/", "usr/", "usr/local/", "usr/local/bin/", entry[1:]}; !slices.Equal(files, want) {
		t.Errorf("layer holds %v, want %v", files, want)
	}
	checkBinary(t, p, binary)
	if p.Architecture == runtime.GOARCH {
		runBinary(ctx, t, c.Name, opts.Version, binary)
	}
}

// readLayer lists the layer's entries (checking owners, the entrypoint's
// exec bits and /tmp's sticky world-writable mode) and returns the
// entrypoint's bytes.
func readLayer(t *testing.T, l v1.Layer, entry string) ([]string, []byte) {
	t.Helper()
	rc, err := l.Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	var names []string
	var binary []byte
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, h.Name)
		if h.Uid != 0 || h.Gid != 0 || !h.ModTime.Equal(sourceDate) {
			t.Errorf("%s: owner %d:%d, time %s", h.Name, h.Uid, h.Gid, h.ModTime)
		}
		switch h.Name {
		case "tmp/":
			if h.Typeflag != tar.TypeDir || h.FileInfo().Mode().Perm() != 0o777 || h.FileInfo().Mode()&os.ModeSticky == 0 {
				t.Errorf("tmp/ mode %s, want a sticky world-writable folder", h.FileInfo().Mode())
			}
		case entry[1:]:
			if h.Typeflag != tar.TypeReg || h.Mode&0o111 != 0o111 {
				t.Errorf("%s: type %c mode %o, want an executable file", h.Name, h.Typeflag, h.Mode)
			}
			if binary, err = io.ReadAll(tr); err != nil {
				t.Fatal(err)
			}
		}
	}
	if binary == nil {
		t.Fatalf("no %s in the layer", entry)
	}
	return names, binary
}
