package realnode

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// Binaries are the programs the real node runs. All but runc come from the
// assets folder devcluster itself lives in (go tool task test:node builds
// them there); runc and iptables are Debian's packages.
type Binaries struct {
	Kubelet, KubeProxy, Containerd, Shim, Ctr string
	// CNIDir holds the CNI plugins bridge, host-local, loopback and portmap.
	CNIDir string
	// Pause and Echo are static builds of devcluster-pause and
	// devcluster-echo, the binaries of the sandbox and echo images.
	Pause, Echo string
	// CoreDNS is the static CoreDNS of kind-e2e/tools/coredns.
	CoreDNS string
	Runc    string
}

// buildHint names what builds a missing asset.
const buildHint = "build the real node's binaries with `go tool task test:node`"

// FindBinaries locates every binary the real node needs next to devcluster
// (assets is the folder of the devcluster binary) and runc on PATH, and
// names every missing one.
func FindBinaries(assets string) (Binaries, error) {
	b := Binaries{
		Kubelet:    filepath.Join(assets, "kubelet"),
		KubeProxy:  filepath.Join(assets, "kube-proxy"),
		Containerd: filepath.Join(assets, "containerd"),
		Shim:       filepath.Join(assets, "containerd-shim-runc-v2"),
		Ctr:        filepath.Join(assets, "ctr"),
		CNIDir:     filepath.Join(assets, "cni"),
		Pause:      filepath.Join(assets, "image", "devcluster-pause"),
		Echo:       filepath.Join(assets, "image", "devcluster-echo"),
		CoreDNS:    filepath.Join(assets, "image", "coredns"),
	}
	var missing []error
	for _, p := range []string{b.Kubelet, b.KubeProxy, b.Containerd, b.Shim, b.Ctr, b.Pause, b.Echo, b.CoreDNS,
		filepath.Join(b.CNIDir, "bridge"), filepath.Join(b.CNIDir, "host-local"),
		filepath.Join(b.CNIDir, "loopback"), filepath.Join(b.CNIDir, "portmap")} {
		if _, err := os.Stat(p); err != nil {
			missing = append(missing, fmt.Errorf("%s is missing (%s)", p, buildHint))
		}
	}
	for _, tool := range []string{"runc", "iptables"} {
		p, err := exec.LookPath(tool)
		if err != nil {
			missing = append(missing, fmt.Errorf("%s not found on PATH: install Debian's package (apt-get install runc iptables; go tool task test:node does it)", tool))
			continue
		}
		if tool == "runc" {
			b.Runc = p
		}
	}
	return b, errors.Join(missing...)
}
