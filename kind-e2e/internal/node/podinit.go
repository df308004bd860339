package node

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// InitSpec is what `devcluster component pod-init SPEC` does inside a fresh
// mount namespace before it becomes the container: bind the volumes at their
// mountPaths, change directory, and exec the container's binary.
type InitSpec struct {
	Binary string   `json:"binary"`
	Argv   []string `json:"argv"`
	Env    []string `json:"env"`
	Dir    string   `json:"dir"`
	Mounts []Mount  `json:"mounts"`
}

// Mount is one bind mount of a volume (or a file in it, for subPath).
type Mount struct {
	Source   string `json:"source"`
	Target   string `json:"target"`
	ReadOnly bool   `json:"readOnly"`
}

// RunInit performs spec in the current process. It is called in a child
// started with CLONE_NEWNS, whose mounts Go has already made private, so
// nothing here is visible on the host. On success it does not return.
func RunInit(specPath string) error {
	b, err := os.ReadFile(specPath)
	if err != nil {
		return fmt.Errorf("pod-init: %w", err)
	}
	var spec InitSpec
	if err := json.Unmarshal(b, &spec); err != nil {
		return fmt.Errorf("pod-init: %s: %w", specPath, err)
	}
	// Every source, and the binary, is opened before the first mount: a
	// volume mounted over a folder that holds other volumes' sources or the
	// binary (an emptyDir at /tmp while the node's folder or the checkout is
	// under /tmp) would hide them. Mounting from the open file is what runc
	// does too. The binary's descriptor stays open across exec (no
	// O_CLOEXEC), so that a script's interpreter can still read it.
	binary, err := unix.Open(spec.Binary, unix.O_PATH, 0)
	if err != nil {
		return fmt.Errorf("pod-init: open %s: %w", spec.Binary, err)
	}
	sources := make([]int, len(spec.Mounts))
	for i, m := range spec.Mounts {
		fd, err := unix.Open(m.Source, unix.O_PATH|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("pod-init: open %s: %w", m.Source, err)
		}
		sources[i] = fd
	}
	for i, m := range spec.Mounts {
		if err := bindMount(m, sources[i]); err != nil {
			return fmt.Errorf("pod-init: mount %s at %s: %w", m.Source, m.Target, err)
		}
	}
	if spec.Dir != "" {
		if err := os.MkdirAll(spec.Dir, 0o755); err == nil {
			_ = os.Chdir(spec.Dir)
		}
	}
	// Exec keeps the PID, so the node's signals reach the container itself.
	return fmt.Errorf("pod-init: exec %s: %w", spec.Binary, unix.Exec(fmt.Sprintf("/proc/self/fd/%d", binary), spec.Argv, spec.Env))
}

// bindMount binds the source, open as fd (O_PATH), at m.Target.
func bindMount(m Mount, fd int) error {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return err
	}
	// Mountpoints must exist. They are created on the host file system
	// (a mount namespace does not isolate writes), as empty folders or files.
	if st.Mode&unix.S_IFMT == unix.S_IFDIR {
		if err := os.MkdirAll(m.Target, 0o755); err != nil {
			return err
		}
	} else {
		if err := os.MkdirAll(filepath.Dir(m.Target), 0o755); err != nil {
			return err
		}
		if _, err := os.Stat(m.Target); os.IsNotExist(err) {
			f, err := os.Create(m.Target)
			if err != nil {
				return err
			}
			f.Close()
		}
	}
	if err := unix.Mount(fmt.Sprintf("/proc/self/fd/%d", fd), m.Target, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return err
	}
	if m.ReadOnly {
		return unix.Mount("", m.Target, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY, "")
	}
	return nil
}
