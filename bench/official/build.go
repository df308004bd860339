package official

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Image is one official image the harness builds: binaries of the tools
// module wrapped by deploy/images' layout mode.
type Image struct {
	// Name is the image (and layout folder) name under OfficialImageRepo.
	Name string
	// Packages are the tools module's main packages; the first is the
	// entrypoint.
	Packages []string
	// Busybox puts busybox and its sh and sysctl links in the image
	// (BusyboxLayoutArgs), as the official proxy pod needs.
	Busybox bool
}

// Images are the official operator's and proxy's images, with what the
// official ones hold: the operator; containerboot, which starts tailscaled
// and talks to it through the tailscale CLI's LocalAPI client, and a shell
// with sysctl for the proxy pod's init container.
func Images() []Image {
	return []Image{
		{Name: OfficialOperatorName, Packages: []string{"tailscale.com/cmd/k8s-operator"}},
		{Name: OfficialProxyName, Packages: []string{"tailscale.com/cmd/containerboot", "tailscale.com/cmd/tailscaled", "tailscale.com/cmd/tailscale"}, Busybox: true},
	}
}

// BuildArgs is the `go build` command line of the official binaries: static
// and stripped as Tailplane's images are (CGO_ENABLED=0 in the environment).
func BuildArgs(outDir string, images []Image) []string {
	args := []string{"build", "-trimpath", "-ldflags=-s -w", "-o", outDir + string(filepath.Separator)}
	for _, im := range images {
		args = append(args, im.Packages...)
	}
	return args
}

// LayoutArgs is the `go run ./deploy/images layout` command line that wraps
// im's binaries (in binDir) as OCI layout outDir/<name>, tagged
// OfficialVersion, with the busybox binary when im wants it. The official
// images run as root, as upstream's do.
func LayoutArgs(im Image, binDir, outDir, busybox string) []string {
	args := []string{"run", "./deploy/images", "layout", "-out", outDir, "-name", im.Name, "-tag", OfficialVersion,
		"-user", "0:0", "-platform", "linux/amd64", "-description", "built from tailscale.com " + OfficialVersion + " by bench/official"}
	for _, p := range im.Packages {
		args = append(args, "-bin", filepath.Join(binDir, filepath.Base(p)))
	}
	if im.Busybox {
		args = append(args, BusyboxLayoutArgs(busybox)...)
	}
	return args
}

// BuildOfficial builds the official binaries from the tools module in
// root/bench/official/tools into binDir, then their images as OCI layouts
// in imagesDir (imagesDir/k8s-operator, imagesDir/tailscale), which
// `devcluster up --import docker.io/tailscale=imagesDir` names as the
// official chart refers to them. Debian's busybox is cached in
// root/.cache/busybox.
func BuildOfficial(ctx context.Context, root, binDir, imagesDir string) error {
	images := Images()
	if err := goCommand(ctx, filepath.Join(root, "bench", "official", "tools"), []string{"CGO_ENABLED=0", "GOOS=linux", "GOARCH=amd64"}, BuildArgs(binDir, images)...); err != nil {
		return fmt.Errorf("build the official binaries: %w", err)
	}
	busybox, err := FetchBusybox(ctx, filepath.Join(root, ".cache", "busybox"))
	if err != nil {
		return fmt.Errorf("busybox for the official proxy image: %w", err)
	}
	for _, im := range images {
		if err := goCommand(ctx, root, nil, LayoutArgs(im, binDir, imagesDir, busybox)...); err != nil {
			return fmt.Errorf("image %s: %w", im.Name, err)
		}
	}
	return nil
}

// BuildTailplaneImages builds Tailplane's images for linux/amd64 into
// imagesDir with the product's own build (deploy/images build), as the e2e
// suite on the real node does.
func BuildTailplaneImages(ctx context.Context, root, imagesDir string) error {
	return goCommand(ctx, root, nil, "run", "./deploy/images", "build", "-out", imagesDir, "-platforms", "linux/amd64", "-tag", "latest")
}

func goCommand(ctx context.Context, dir string, env []string, args ...string) error {
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(out.String()))
	}
	return nil
}
