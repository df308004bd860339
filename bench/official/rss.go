package official

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// PodRSS is the resident memory of a pod's container processes on this
// machine (the real node's containers are processes of its kernel): the sum
// of VmRSS over every process in procDir (normally /proc) whose cgroup names
// the pod's UID, leaving out the pod's pause process. It reports how many
// processes it counted; none is an error.
func PodRSS(procDir, podUID string) (total int64, processes int, err error) {
	if podUID == "" {
		return 0, 0, errors.New("pod RSS: no pod UID")
	}
	// cgroupfs writes pod<uid>, the systemd driver pod<uid with underscores>.
	marks := [][]byte{[]byte("pod" + podUID), []byte("pod" + strings.ReplaceAll(podUID, "-", "_"))}
	entries, err := os.ReadDir(procDir)
	if err != nil {
		return 0, 0, fmt.Errorf("pod RSS: %w", err)
	}
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		dir := filepath.Join(procDir, e.Name())
		cg, err := os.ReadFile(filepath.Join(dir, "cgroup"))
		if err != nil || !(bytes.Contains(cg, marks[0]) || bytes.Contains(cg, marks[1])) {
			continue // gone, or not the pod's
		}
		comm, _ := os.ReadFile(filepath.Join(dir, "comm"))
		if isPause(strings.TrimSpace(string(comm))) {
			continue
		}
		kb, err := vmRSS(filepath.Join(dir, "status"))
		if err != nil {
			continue // exited while read
		}
		total += kb * 1024
		processes++
	}
	if processes == 0 {
		return 0, 0, fmt.Errorf("pod RSS: no process of pod %s in %s", podUID, procDir)
	}
	return total, processes, nil
}

// isPause says whether a process name is a pod sandbox's (the pause image
// of containerd's default, or devcluster's own).
func isPause(comm string) bool {
	return comm == "pause" || strings.HasPrefix(comm, "devcluster-paus")
}

// vmRSS reads the VmRSS line (kB) of a /proc/<pid>/status file.
func vmRSS(path string) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			fields := strings.Fields(rest)
			if len(fields) == 0 {
				break
			}
			return strconv.ParseInt(fields[0], 10, 64)
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("%s: no VmRSS (a kernel thread or a zombie)", path)
}
