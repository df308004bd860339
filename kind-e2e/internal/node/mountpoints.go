package node

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
)

// mountpoints creates the host folders (and files, for subPath mounts of a
// file) that pods' mountPaths need, and removes them once no pod uses them.
// A mount namespace does not isolate writes, so without this every
// mountPath would be left behind on the host as an empty folder. It never
// removes a path while another pod may have a mount on it: removing a
// mountpoint on the host detaches that mount in other namespaces too.
type mountpoints struct {
	file string // run/mountpoints.json: created paths, for down after a crash

	mu      sync.Mutex
	refs    map[string]int      // target -> pods using it
	created map[string][]string // target -> paths created for it, deepest first
}

func newMountpoints(dir string) *mountpoints {
	return &mountpoints{file: filepath.Join(dir, "run", "mountpoints.json"), refs: map[string]int{}, created: map[string][]string{}}
}

// claim makes target exist (a folder, or an empty file when isFile).
func (m *mountpoints) claim(target string, isFile bool) error {
	target = filepath.Clean(target)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.refs[target]++
	if m.refs[target] > 1 {
		return nil
	}
	var missing []string
	for p := target; p != "/" && p != "."; p = filepath.Dir(p) {
		if _, err := os.Lstat(p); err == nil {
			break
		} else if !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		missing = append(missing, p)
	}
	if len(missing) == 0 {
		return nil
	}
	parent := target
	if isFile {
		parent = filepath.Dir(target)
	}
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return err
	}
	if isFile {
		f, err := os.OpenFile(target, os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			return err
		}
		f.Close()
	}
	m.created[target] = missing
	return m.saveLocked()
}

// release drops one use of target and removes what claim created when none
// is left.
func (m *mountpoints) release(target string) {
	target = filepath.Clean(target)
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.refs[target]--; m.refs[target] > 0 {
		return
	}
	delete(m.refs, target)
	// Remove every chain no pod needs any more; a chain kept earlier for
	// another pod's sake may be free now.
	for again := true; again; {
		again = false
		for t, chain := range m.created {
			if m.refs[t] == 0 && m.removeChainLocked(chain) {
				delete(m.created, t)
				again = true
			}
		}
	}
	_ = m.saveLocked()
}

func (m *mountpoints) saveLocked() error {
	var all []string
	for _, chain := range m.created {
		all = append(all, chain...)
	}
	b, _ := json.Marshal(all)
	return os.WriteFile(m.file, b, 0o644)
}

// removeChainLocked removes paths deepest first and reports whether all are
// gone. It never removes a path that is itself a target in use, and
// os.Remove leaves folders that are not empty.
func (m *mountpoints) removeChainLocked(paths []string) bool {
	for _, p := range paths {
		if m.refs[p] > 0 {
			return false
		}
		st, err := os.Lstat(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil || (!st.IsDir() && st.Size() > 0) || os.Remove(p) != nil {
			return false
		}
	}
	return true
}

// RemoveRecordedMountpoints removes the mountpoints an earlier run of dir
// created and did not remove (devcluster was killed). Call it only when no
// pod of dir runs.
func RemoveRecordedMountpoints(dir string) {
	file := filepath.Join(dir, "run", "mountpoints.json")
	b, err := os.ReadFile(file)
	if err != nil {
		return
	}
	var paths []string
	if json.Unmarshal(b, &paths) == nil {
		// Deepest first.
		slices.SortFunc(paths, func(a, b string) int { return strings.Count(b, "/") - strings.Count(a, "/") })
		for _, p := range paths {
			_ = os.Remove(p)
		}
	}
	_ = os.Remove(file)
}
