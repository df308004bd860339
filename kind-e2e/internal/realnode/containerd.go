package realnode

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// containerdConfig is containerd's config (version 3, containerd 2.x).
// Everything containerd keeps is under the cluster directory, the network
// namespaces included (netns_mounts_under_state_dir), so `down` finds every
// mount there. The sandbox image is pinned so that image garbage collection
// never removes it; runc is Debian's, with cgroupfs (cgroup v1 here), its
// state under the cluster directory too.
const containerdConfig = `version = 3
root = %[1]s
state = %[2]s
disabled_plugins = ['io.containerd.snapshotter.v1.btrfs', 'io.containerd.snapshotter.v1.zfs', 'io.containerd.snapshotter.v1.devmapper', 'io.containerd.snapshotter.v1.blockfile', 'io.containerd.snapshotter.v1.erofs', 'io.containerd.tracing.processor.v1.otlp', 'io.containerd.internal.v1.tracing', 'io.containerd.nri.v1.nri']

[grpc]
  address = %[3]s

[plugins.'io.containerd.cri.v1.images']
  snapshotter = %[4]s
  [plugins.'io.containerd.cri.v1.images'.pinned_images]
    sandbox = %[5]s

[plugins.'io.containerd.cri.v1.runtime']
  netns_mounts_under_state_dir = true
  restrict_oom_score_adj = %[9]t
  [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
    runtime_type = 'io.containerd.runc.v2'
    [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
      BinaryName = %[6]s
      Root = %[10]s
      SystemdCgroup = false
  [plugins.'io.containerd.cri.v1.runtime'.cni]
    bin_dirs = [%[7]s]
    conf_dir = %[8]s

[plugins.'io.containerd.grpc.v1.cri']
  stream_server_address = '127.0.0.1'
`

// canLowerOOMScore reports whether this process may lower its
// oom_score_adj, which needs CAP_SYS_RESOURCE. Where it may not (some
// sandboxes and VMs drop that capability even for root), runc cannot give the
// pause container and Guaranteed pods the kubelet's negative scores, so
// containerd is told to clamp scores at its own (restrict_oom_score_adj), as
// for rootless containerd.
func canLowerOOMScore() bool {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "CapEff:"); ok {
			caps, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			return err == nil && caps&(1<<capSysResource) != 0
		}
	}
	return false
}

// capSysResource is CAP_SYS_RESOURCE's bit in the capability sets.
const capSysResource = 24

// containerdPaths are containerd's folders and socket in a cluster directory.
type containerdPaths struct {
	root, state, socket, config, cniConf, cniIPAM string
}

func pathsOf(dir string) containerdPaths {
	d := filepath.Join(dir, "containerd")
	return containerdPaths{
		root: filepath.Join(d, "root"), state: filepath.Join(d, "state"),
		socket: filepath.Join(d, "containerd.sock"), config: filepath.Join(d, "config.toml"),
		cniConf: filepath.Join(dir, "cni", "net.d"), cniIPAM: filepath.Join(dir, "cni", "ipam"),
	}
}

// startContainerd writes the config and starts containerd, returning once
// its socket answers.
func startContainerd(ctx context.Context, dir, logsDir, snapshotter string, bins Binaries) (*proc, error) {
	p := pathsOf(dir)
	for _, d := range []string{p.root, p.state} {
		if err := os.MkdirAll(d, 0o711); err != nil {
			return nil, err
		}
	}
	q := strconv.Quote
	conf := fmt.Sprintf(containerdConfig, q(p.root), q(p.state), q(p.socket), q(snapshotter), q(PauseImage),
		q(bins.Runc), q(bins.CNIDir), q(p.cniConf), !canLowerOOMScore(), q(filepath.Join(dir, "containerd", "runc")))
	if err := os.WriteFile(p.config, []byte(conf), 0o644); err != nil {
		return nil, err
	}
	_ = os.Remove(p.socket)
	// The shim is found on PATH, next to containerd.
	path := "PATH=" + filepath.Dir(bins.Shim) + ":/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
	proc, err := startProc(logsDir, "containerd", bins.Containerd, []string{"--config", p.config, "--log-level", "warn"}, []string{path})
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(time.Minute)
	for {
		if c, err := net.DialTimeout("unix", p.socket, time.Second); err == nil {
			c.Close()
			return proc, nil
		}
		select {
		case <-proc.exited:
			return nil, proc.err
		case <-ctx.Done():
			proc.stop(5 * time.Second)
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			proc.stop(5 * time.Second)
			return nil, fmt.Errorf("containerd: no socket %s after 1m", p.socket)
		}
	}
}
