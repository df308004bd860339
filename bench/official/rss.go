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
	dirs, err := podProcesses(procDir, podUID)
	if err != nil {
		return 0, 0, fmt.Errorf("pod RSS: %w", err)
	}
	for _, dir := range dirs {
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

// PodCPU is the CPU time (user and system, in seconds) the pod's container
// processes have used so far, pause left out, from each process's stat in
// procDir. Differences between two readings are what the pod used between
// them, as long as its processes did not restart.
func PodCPU(procDir, podUID string) (float64, error) {
	dirs, err := podProcesses(procDir, podUID)
	if err != nil {
		return 0, fmt.Errorf("pod CPU: %w", err)
	}
	var ticks int64
	for _, dir := range dirs {
		b, err := os.ReadFile(filepath.Join(dir, "stat"))
		if err != nil {
			continue // exited while read
		}
		t, err := statTicks(b)
		if err != nil {
			return 0, fmt.Errorf("pod CPU: %s: %w", dir, err)
		}
		ticks += t
	}
	return float64(ticks) / clockTicks, nil
}

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat's times: 100 on
// every Linux architecture Go runs on.
const clockTicks = 100

// statTicks is utime + stime (fields 14 and 15) of a /proc/<pid>/stat
// line. The command name (field 2) may hold spaces and parentheses, so the
// fields are counted from its closing parenthesis.
func statTicks(stat []byte) (int64, error) {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, errors.New("no command name in stat")
	}
	fields := strings.Fields(string(stat[i+1:]))
	// fields[0] is field 3 (state): utime is field 14, stime field 15.
	if len(fields) < 13 {
		return 0, fmt.Errorf("stat has %d fields after the name, want at least 13", len(fields))
	}
	utime, err := strconv.ParseInt(fields[11], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("utime: %w", err)
	}
	stime, err := strconv.ParseInt(fields[12], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("stime: %w", err)
	}
	return utime + stime, nil
}

// podProcesses are the /proc folders of the pod's processes but its pause
// process: those whose cgroup names the pod's UID.
func podProcesses(procDir, podUID string) ([]string, error) {
	if podUID == "" {
		return nil, errors.New("no pod UID")
	}
	// cgroupfs writes pod<uid>, the systemd driver pod<uid with underscores>.
	marks := [][]byte{[]byte("pod" + podUID), []byte("pod" + strings.ReplaceAll(podUID, "-", "_"))}
	entries, err := os.ReadDir(procDir)
	if err != nil {
		return nil, err
	}
	var dirs []string
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
		dirs = append(dirs, dir)
	}
	return dirs, nil
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
