package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/tailplane/tailplane/kind-e2e/internal/node"
	"github.com/tailplane/tailplane/kind-e2e/internal/realnode"
)

// runDown stops the `up` of a cluster directory: SIGTERM (up then stops its
// pods, proxy, tailnet and control plane in order), SIGKILL after 60 s, then
// it ends any pod process group still recorded, removes the mountpoint
// folders pods needed, and removes the pod route; for a real node it ends
// containerd, its shims, the kubelet and the containers and removes their
// mounts, cgroups and bridge (realnode.Cleanup).
// The directory's state stays, so a later `up` resumes the cluster.
func runDown(args []string) error {
	fs := flag.NewFlagSet("down", flag.ExitOnError)
	dir := fs.String("dir", "", "cluster directory; required")
	_ = fs.Parse(args)
	if *dir == "" {
		return errors.New("down: --dir is required")
	}
	abs, err := filepath.Abs(*dir)
	if err != nil {
		return err
	}
	b, err := os.ReadFile(filepath.Join(abs, "devcluster.pid"))
	if err == nil {
		pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
		if pid > 1 && syscall.Kill(pid, syscall.SIGTERM) == nil {
			deadline := time.Now().Add(60 * time.Second)
			for syscall.Kill(pid, 0) == nil && time.Now().Before(deadline) {
				time.Sleep(100 * time.Millisecond)
			}
			if syscall.Kill(pid, 0) == nil {
				_ = syscall.Kill(pid, syscall.SIGKILL)
				fmt.Fprintf(os.Stderr, "devcluster: pid %d did not stop in 60s; killed\n", pid)
				// Its files and locks go with the process, not the signal.
				for i := 0; i < 100 && syscall.Kill(pid, 0) == nil; i++ {
					time.Sleep(50 * time.Millisecond)
				}
			}
		}
		_ = os.Remove(filepath.Join(abs, "devcluster.pid"))
	} else if !errors.Is(err, os.ErrNotExist) {
		return err
	}
	if err := realnode.Cleanup(abs, assetsDir()); err != nil {
		return err
	}
	node.KillRecordedGroups(abs)
	node.RemoveRecordedMountpoints(abs)
	if err := node.ReleasePodSubnet(abs); err != nil {
		return err
	}
	fmt.Println("down")
	return nil
}
