package gatewayconformance

import (
	"bufio"
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/gateway-api/conformance"

	"github.com/tailplane/tailplane/kind-e2e/internal/realnode"
)

// standInImages are the images of the suite's manifests that
// devcluster-echo-basic stands in for (path.Match patterns of the
// reference without its registry): echo-basic in every version, and the
// base manifests' CoreDNS (the UDP tests' DNS server). echo-advanced is the
// mesh profiles' only, which this runner does not run.
func standInImages() []string { return []string{"gateway-api/echo-basic:*", "coredns/coredns:*"} }

// suiteImages lists the images of the suite's base and test manifests that
// the stand-in serves, each once, sorted: read from the manifests the suite
// applies, so that a new version in a new release is mapped too.
func suiteImages() ([]string, error) {
	var refs []string
	err := fs.WalkDir(conformance.Manifests, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".yaml") || strings.HasPrefix(p, "mesh/") {
			return err
		}
		f, err := conformance.Manifests.Open(p)
		if err != nil {
			return fmt.Errorf("open %s: %w", p, err)
		}
		defer f.Close()
		lines := bufio.NewScanner(f)
		for lines.Scan() {
			field, ref, ok := strings.Cut(strings.TrimSpace(lines.Text()), ":")
			ref = strings.Trim(strings.TrimSpace(ref), `"'`)
			if !ok || strings.TrimPrefix(field, "- ") != "image" || slices.Contains(refs, ref) {
				continue
			}
			_, repo, _ := strings.Cut(ref, "/")
			for _, pattern := range standInImages() {
				if ok, _ := path.Match(pattern, repo); ok {
					refs = append(refs, ref)
				}
			}
		}
		return lines.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("the suite's manifests: %w", err)
	}
	slices.Sort(refs)
	return refs, nil
}

func TestSuiteImagesAreMapped(t *testing.T) {
	refs, err := suiteImages()
	if err != nil {
		t.Fatal(err)
	}
	// The base manifests' backends and CoreDNS must be among them, or the
	// Setup's pods never start.
	for _, want := range []string{"registry.k8s.io/gateway-api/echo-basic:v1.5.1", "registry.k8s.io/coredns/coredns:v1.12.2"} {
		if !slices.Contains(refs, want) {
			t.Errorf("the images of the suite's manifests %q lack %s", refs, want)
		}
	}
}

// standInArchives builds devcluster-echo-basic (static, for a scratch
// image) into work and writes one image archive of it per image of the
// suite's manifests, named as the manifests name it, for `devcluster up
// --import`: the real node has no registry to pull from.
func standInArchives(ctx context.Context, t *testing.T, work string) []string {
	t.Helper()
	start := time.Now()
	bin := filepath.Join(work, "devcluster-echo-basic")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "../cmd/devcluster-echo-basic")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build devcluster-echo-basic: %v\n%s", err, out)
	}
	refs, err := suiteImages()
	if err != nil {
		t.Fatal(err)
	}
	var archives []string
	for _, ref := range refs {
		archive := filepath.Join(work, "images", strings.NewReplacer("/", "_", ":", "_").Replace(ref)+".tar")
		if err := realnode.WriteBinaryImage(archive, ref, bin); err != nil {
			t.Fatalf("image %s: %v", ref, err)
		}
		archives = append(archives, archive)
	}
	t.Logf("TIME devcluster-echo-basic and its %d images %v: %s", len(refs), refs, time.Since(start).Round(time.Second))
	return archives
}

// productImages builds the operator and proxy images (linux/amd64) with
// deploy/images into .cache/e2e-images, as the operator suite does on the
// real node; devcluster imports them under the chart's references.
func productImages(ctx context.Context, t *testing.T, root string) string {
	t.Helper()
	start := time.Now()
	out := filepath.Join(root, ".cache", "e2e-images")
	cmd := exec.CommandContext(ctx, "go", "run", "./deploy/images", "build", "-out", out, "-platforms", "linux/amd64", "-tag", "latest")
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go run ./deploy/images build: %v\n%s", err, b)
	}
	t.Logf("TIME image build (linux/amd64): %s", time.Since(start).Round(time.Second))
	return out
}
