package realnode

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// removePods stops and removes every pod sandbox through the CRI, which ends
// their containers, tears their network down (CNI DEL) and unmounts their
// root filesystems: what a drained node looks like.
func removePods(ctx context.Context, socket string) error {
	conn, err := grpc.NewClient("unix://"+socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return fmt.Errorf("CRI %s: %w", socket, err)
	}
	defer conn.Close()
	rt := runtimeapi.NewRuntimeServiceClient(conn)
	list, err := rt.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	if err != nil {
		return fmt.Errorf("list pod sandboxes: %w", err)
	}
	var errs []error
	for _, s := range list.Items {
		if _, err := rt.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: s.Id}); err != nil {
			errs = append(errs, fmt.Errorf("stop pod sandbox %s (%s/%s): %w", s.Id, s.Metadata.GetNamespace(), s.Metadata.GetName(), err))
			continue
		}
		if _, err := rt.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: s.Id}); err != nil {
			errs = append(errs, fmt.Errorf("remove pod sandbox %s: %w", s.Id, err))
		}
	}
	return errors.Join(errs...)
}

// kubepods is the kubelet's cgroup (cgroupRoot "/", cgroupfs driver) in
// every cgroup v1 hierarchy.
const kubepods = "kubepods"

// Cleanup removes what a real node of dir may have left when its devcluster
// was killed: processes started for it (containerd, its shims, the
// kubelet), mounts under dir (root filesystems, network namespaces, volume
// tmpfs) and, unless another real node runs, the machine-wide parts too
// (container processes in the kubepods cgroups, those cgroups, the bridge).
// `devcluster down` calls it; it does nothing for a process-node cluster.
// assets is the folder of the node's binaries (devcluster's own).
func Cleanup(dir, assets string) error {
	if _, err := os.Stat(filepath.Join(dir, markerFile)); err != nil {
		return nil
	}
	lock, err := tryLock(dir)
	if err != nil {
		return err
	}
	var errs []error
	killProcesses(func(cmdline, _ string) bool { return nodeProcess(cmdline, dir) })
	if lock != nil {
		defer lock.release()
		killProcesses(func(_, cgroups string) bool { return containsKubepods(cgroups) })
	}
	errs = append(errs, unmountUnder(dir))
	if lock != nil {
		errs = append(errs, removeCgroups(), removeBridge())
		if bins, err := FindBinaries(assets); err == nil {
			errs = append(errs, cleanupKubeProxy(bins.KubeProxy))
		}
		cleanupKubeletChains()
	}
	return errors.Join(errs...)
}

// killProcesses SIGKILLs every process match selects by its command line
// (NUL-separated) or its /proc/PID/cgroup, and waits up to 10 s for them to
// go.
func killProcesses(match func(cmdline, cgroups string) bool) {
	self := os.Getpid()
	var killed []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self || pid == 1 {
			continue
		}
		cmdline, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		cgroups, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cgroup"))
		if len(cmdline) == 0 && len(cgroups) == 0 {
			continue
		}
		if match(strings.ReplaceAll(string(cmdline), "\x00", " "), string(cgroups)) {
			if syscall.Kill(pid, syscall.SIGKILL) == nil {
				killed = append(killed, pid)
			}
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for _, pid := range killed {
		for alive(pid) && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// alive reports whether pid exists and is not a zombie.
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	return err == nil && !strings.Contains(string(b), ") Z ")
}

// mountsUnder lists the mount points under dir, deepest first.
func mountsUnder(dir string) ([]string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		mp := unescapeMount(fields[4])
		if strings.HasPrefix(mp, dir+"/") {
			out = append(out, mp)
		}
	}
	sort.Slice(out, func(i, j int) bool { return len(out[i]) > len(out[j]) })
	return out, sc.Err()
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// unmountUnder detaches every mount under dir, deepest first; a mount that
// appears more than once (stacked) is detached until none is left.
func unmountUnder(dir string) error {
	for range 5 {
		mps, err := mountsUnder(dir)
		if err != nil || len(mps) == 0 {
			return err
		}
		for _, mp := range mps {
			_ = syscall.Unmount(mp, syscall.MNT_DETACH)
		}
	}
	mps, err := mountsUnder(dir)
	if err == nil && len(mps) > 0 {
		err = fmt.Errorf("still mounted under %s: %s", dir, strings.Join(mps, ", "))
	}
	return err
}

// removeCgroups removes the kubelet's cgroups in every hierarchy, deepest
// first, so that the next kubelet starts from nothing.
func removeCgroups() error {
	roots, _ := filepath.Glob("/sys/fs/cgroup/*/" + kubepods)
	var errs []error
	for _, root := range roots {
		var dirs []string
		_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		sort.Slice(dirs, func(i, j int) bool { return len(dirs[i]) > len(dirs[j]) })
		for _, d := range dirs {
			if err := syscall.Rmdir(d); err != nil && !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, fmt.Errorf("remove cgroup %s: %w", d, err))
			}
		}
	}
	return errors.Join(errs...)
}

// nodeProcess reports whether a command line is one of the real node's own
// processes for dir: containerd, a shim of it or the kubelet, each of which
// names a file under dir. (The control plane's processes name dir too, but
// they die with devcluster.)
func nodeProcess(cmdline, dir string) bool {
	prog, _, _ := strings.Cut(cmdline, " ")
	switch filepath.Base(prog) {
	case "containerd", "containerd-shim-runc-v2", "kubelet", "kube-proxy":
		return strings.Contains(cmdline, dir+"/")
	}
	return false
}

// containsKubepods reports whether /proc/PID/cgroup puts the process in the
// kubelet's cgroups: it is a container's.
func containsKubepods(cgroups string) bool { return strings.Contains(cgroups, ":/"+kubepods) }
