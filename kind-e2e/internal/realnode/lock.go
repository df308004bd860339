package realnode

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// markerFile in a cluster directory says that its node is a real node.
const markerFile = "real-node"

// lockPath is the machine-wide lock of the real node, held by the `up`
// that runs one; it holds that cluster's directory.
func lockPath() string { return filepath.Join(os.TempDir(), "devcluster-real-node.lock") }

type machineLock struct{ f *os.File }

// lock takes the machine-wide lock for dir or says which cluster holds it.
func lock(dir string) (*machineLock, error) {
	l, err := tryLock(dir)
	if err != nil {
		return nil, err
	}
	if l == nil {
		owner, _ := os.ReadFile(lockPath())
		return nil, fmt.Errorf("a real node already runs on this machine, for the cluster in %s (one real node per machine: the kubelet's cgroups, the bridge %s and the pod range %s are the machine's); stop it with devcluster down --dir %s",
			strings.TrimSpace(string(owner)), Bridge, PodCIDR, strings.TrimSpace(string(owner)))
	}
	return l, nil
}

// tryLock takes the lock and records dir in it; nil, nil when another
// process holds it.
func tryLock(dir string) (*machineLock, error) {
	f, err := os.OpenFile(lockPath(), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("real node lock: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if err == syscall.EWOULDBLOCK {
			return nil, nil
		}
		return nil, fmt.Errorf("real node lock %s: %w", lockPath(), err)
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(dir+"\n"), 0)
	}
	return &machineLock{f: f}, nil
}

func (l *machineLock) release() {
	if l != nil {
		_ = l.f.Close()
	}
}
