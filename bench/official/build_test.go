package official

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The proxy image holds containerboot (its entrypoint, the first -bin),
// tailscaled and the CLI, from one go build of the tools module; the images
// run as root and are tagged with the pinned version.
func TestBuildAndLayoutArgs(t *testing.T) {
	images := Images()
	build := strings.Join(BuildArgs("/b", images), " ")
	for _, p := range []string{"tailscale.com/cmd/k8s-operator", "tailscale.com/cmd/containerboot", "tailscale.com/cmd/tailscaled", "tailscale.com/cmd/tailscale"} {
		if !strings.Contains(build, " "+p) {
			t.Errorf("go %s does not build %s", build, p)
		}
	}
	if !strings.Contains(build, "-o /b/") || !strings.Contains(build, "-trimpath") {
		t.Errorf("go %s: want -trimpath and -o /b/", build)
	}
	proxy := images[1]
	args := LayoutArgs(proxy, "/b", "/img", "/cache/busybox")
	var bins []string
	for i, a := range args {
		if a == "-bin" {
			bins = append(bins, args[i+1])
		}
	}
	if want := []string{"/b/containerboot", "/b/tailscaled", "/b/tailscale"}; !slices.Equal(bins, want) {
		t.Errorf("proxy image binaries %v, want %v (containerboot first: the entrypoint)", bins, want)
	}
	joined := strings.Join(args, " ")
	for _, want := range []string{"run ./deploy/images layout", "-name tailscale", "-tag " + OfficialVersion, "-user 0:0", "-out /img",
		// The init container's /bin/sh -c "sysctl -w ...".
		"-file /cache/busybox=/bin/busybox", "-link /bin/sh=busybox", "-link /sbin/sysctl=/bin/busybox", "-path " + busyboxPath} {
		if !strings.Contains(joined, want) {
			t.Errorf("go %s lacks %q", joined, want)
		}
	}
	if op := strings.Join(LayoutArgs(images[0], "/b", "/img", "/cache/busybox"), " "); strings.Contains(op, "busybox") {
		t.Errorf("the operator image gets busybox: go %s", op)
	}
}

// The busybox binary comes from the .deb cached in the folder (nothing is
// downloaded when one is there), extracted with dpkg-deb once; later calls
// reuse the binary.
func TestFetchBusyboxFromCachedDeb(t *testing.T) {
	// A package of the same shape as Debian's busybox-static: bin/busybox.
	pkg := t.TempDir()
	const fake = "#!/bin/sh\necho busybox\n"
	for path, body := range map[string]string{
		"DEBIAN/control": "Package: busybox-static\nVersion: 1:1.35.0-4+deb12u1+b1\nArchitecture: amd64\nMaintainer: test <test@example.com>\nDescription: test\n",
		"bin/busybox":    fake,
	} {
		if err := os.MkdirAll(filepath.Join(pkg, filepath.Dir(path)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(pkg, path), []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cache := t.TempDir()
	deb := filepath.Join(cache, "busybox-static_1%3a1.35.0-4+deb12u1+b1_amd64.deb")
	if out, err := exec.Command("dpkg-deb", "--root-owner-group", "-b", pkg, deb).CombinedOutput(); err != nil {
		t.Fatalf("dpkg-deb -b: %v: %s", err, out)
	}
	bin, err := FetchBusybox(context.Background(), cache)
	if err != nil {
		t.Fatal(err)
	}
	if body, err := os.ReadFile(bin); err != nil || string(body) != fake || bin != filepath.Join(cache, "busybox") {
		t.Fatalf("FetchBusybox = %s holding %q (%v), want %s/busybox from the .deb", bin, body, err, cache)
	}
	if err := os.Remove(deb); err != nil {
		t.Fatal(err)
	}
	again, err := FetchBusybox(context.Background(), cache)
	if err != nil || again != bin {
		t.Fatalf("second fetch: %s, %v; want %s without the .deb", again, err, bin)
	}
}
