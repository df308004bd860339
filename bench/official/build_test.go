package official

import (
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
	args := LayoutArgs(proxy, "/b", "/img")
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
	for _, want := range []string{"run ./deploy/images layout", "-name tailscale", "-tag " + OfficialVersion, "-user 0:0", "-out /img"} {
		if !strings.Contains(joined, want) {
			t.Errorf("go %s lacks %q", joined, want)
		}
	}
}
