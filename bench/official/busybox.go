package official

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// BusyboxPackage is Debian's static busybox, pinned: the official proxy
// image needs a shell and sysctl, which upstream's Alpine image has and
// ours (three Go binaries) does not. The official proxy pod's privileged
// init container "sysctler" runs
// `/bin/sh -c "sysctl -w net.ipv4.ip_forward=1 && if sysctl ...; fi"`.
const BusyboxPackage = "busybox-static=1:1.35.0-4+deb12u1+b1"

// busyboxPath is the search path of the official proxy image: Alpine's,
// so that what containerboot and the init container look up is where
// upstream's image has it.
const busyboxPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// BusyboxLayoutArgs are the `deploy/images layout` arguments that put the
// busybox binary at /bin/busybox with the applets the official proxy pod
// runs (sh, sysctl) linked where Alpine has them.
func BusyboxLayoutArgs(busybox string) []string {
	return []string{"-file", busybox + "=/bin/busybox", "-link", "/bin/sh=busybox", "-link", "/sbin/sysctl=/bin/busybox", "-path", busyboxPath}
}

// FetchBusybox returns cacheDir/busybox, the busybox binary of
// BusyboxPackage, downloading the .deb with `apt-get download` and
// extracting it with dpkg-deb the first time (Debian's packages are
// reachable where container registries are not). The .deb stays in
// cacheDir.
func FetchBusybox(ctx context.Context, cacheDir string) (string, error) {
	bin := filepath.Join(cacheDir, "busybox")
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	if err := os.MkdirAll(cacheDir, 0o755); err != nil {
		return "", err
	}
	deb, err := findDeb(cacheDir)
	if err != nil {
		return "", err
	}
	if deb == "" {
		if err := runIn(ctx, cacheDir, "apt-get", "download", BusyboxPackage); err != nil {
			return "", fmt.Errorf("download %s (run apt-get update first if the version is unknown): %w", BusyboxPackage, err)
		}
		if deb, err = findDeb(cacheDir); err != nil || deb == "" {
			return "", fmt.Errorf("apt-get download %s left no .deb in %s (%v)", BusyboxPackage, cacheDir, err)
		}
	}
	tmp, err := os.MkdirTemp(cacheDir, "extract-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	if err := runIn(ctx, cacheDir, "dpkg-deb", "-x", deb, tmp); err != nil {
		return "", fmt.Errorf("extract %s: %w", deb, err)
	}
	if err := os.Rename(filepath.Join(tmp, "bin", "busybox"), bin); err != nil {
		return "", fmt.Errorf("%s holds no bin/busybox: %w", deb, err)
	}
	return bin, nil
}

// findDeb is the busybox-static .deb in dir, or "".
func findDeb(dir string) (string, error) {
	debs, err := filepath.Glob(filepath.Join(dir, "busybox-static_*.deb"))
	if err != nil || len(debs) == 0 {
		return "", err
	}
	return debs[len(debs)-1], nil
}

func runIn(ctx context.Context, dir, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}
