package official

import (
	"os"
	"path/filepath"
	"testing"
)

// fakeProc writes a /proc-like folder: pid -> cgroup, comm, VmRSS in kB.
func fakeProc(t *testing.T, procs map[string][3]string) string {
	t.Helper()
	dir := t.TempDir()
	for pid, p := range procs {
		d := filepath.Join(dir, pid)
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		status := "Name:\t" + p[1] + "\n"
		if p[2] != "" {
			status += "VmRSS:\t   " + p[2] + " kB\n"
		}
		for name, body := range map[string]string{"cgroup": p[0], "comm": p[1] + "\n", "status": status} {
			if err := os.WriteFile(filepath.Join(d, name), []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "meminfo"), []byte("MemTotal: 1 kB\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// The pod's container processes count (containerboot and tailscaled of one
// official proxy, under either cgroup driver's naming); its pause process,
// other pods and kernel threads do not.
func TestPodRSS(t *testing.T) {
	uid := "0b1c2d3e-aaaa-bbbb-cccc-123456789abc"
	proc := fakeProc(t, map[string][3]string{
		"10": {"12:memory:/kubepods/besteffort/pod" + uid + "/abc\n", "containerboot", "10240"},
		"11": {"0::/kubepods.slice/kubepods-pod" + "0b1c2d3e_aaaa_bbbb_cccc_123456789abc" + ".slice/cri-containerd-x.scope\n", "tailscaled", "30720"},
		"12": {"12:memory:/kubepods/besteffort/pod" + uid + "/pause\n", "pause", "512"},
		"13": {"12:memory:/kubepods/besteffort/pod99999999-aaaa-bbbb-cccc-123456789abc/x\n", "other", "99999"},
		"14": {"12:memory:/kubepods/besteffort/pod" + uid + "/abc\n", "kworker", ""},
	})
	got, n, err := PodRSS(proc, uid)
	if err != nil {
		t.Fatal(err)
	}
	if want := int64(10240+30720) * 1024; got != want || n != 2 {
		t.Errorf("PodRSS = %d bytes in %d processes, want %d in 2", got, n, want)
	}
	if _, _, err := PodRSS(proc, "ffffffff-0000-0000-0000-000000000000"); err == nil {
		t.Error("a pod with no process gave no error")
	}
}

// A stat line's utime and stime are counted after the command name, which
// may hold spaces and parentheses.
func TestStatTicks(t *testing.T) {
	line := "4242 (tailplane (op) x) S 1 4242 4242 0 -1 4194560 9000 0 12 0 1234 567 0 0 20 0 14 0 100 800000000 20000 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0\n"
	got, err := statTicks([]byte(line))
	if err != nil {
		t.Fatal(err)
	}
	if got != 1234+567 {
		t.Errorf("statTicks = %d, want %d", got, 1234+567)
	}
	if _, err := statTicks([]byte("4242 (short) S 1 2")); err == nil {
		t.Error("a short stat line gave no error")
	}
}
