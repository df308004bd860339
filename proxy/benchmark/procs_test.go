package benchmark

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"tailscale.com/tsnet"

	"github.com/tailplane/tailplane/proxy/config"
)

// buildBinaries builds tailplane-proxy and servenode once per run.
func buildBinaries(b *testing.B) (proxyBin, serveBin string) {
	b.Helper()
	dir := b.TempDir()
	proxyBin, serveBin = filepath.Join(dir, "tailplane-proxy"), filepath.Join(dir, "servenode")
	for bin, pkg := range map[string]string{proxyBin: "../../cmd/tailplane-proxy", serveBin: "./servenode"} {
		out, err := exec.Command("go", "build", "-o", bin, pkg).CombinedOutput()
		if err != nil {
			b.Fatalf("go build %s: %v\n%s", pkg, err, out)
		}
	}
	return proxyBin, serveBin
}

// startTailplaneProxy runs tailplane-proxy as hostname bench-proxy, an L7
// ingress with l7, configured from a file, with its state in dir/tp.
func startTailplaneProxy(b *testing.B, bin, dir, controlURL string, l7 *config.L7, env ...string) *exec.Cmd {
	b.Helper()
	cfg := &config.Config{Version: config.Version, Hostname: "bench-proxy", LoginServer: controlURL, Role: config.RoleIngressL7, L7: l7}
	return startProxyConfig(b, bin, dir, cfg, env...)
}

// startProxyConfig runs tailplane-proxy with cfg, configured from a file in
// dir, with its state in dir/tp.
func startProxyConfig(b *testing.B, bin, dir string, cfg *config.Config, env ...string) *exec.Cmd {
	b.Helper()
	doc, err := json.Marshal(cfg)
	if err != nil {
		b.Fatal(err)
	}
	cfgPath := filepath.Join(dir, "proxy-config.json")
	if err := os.WriteFile(cfgPath, doc, 0o600); err != nil {
		b.Fatal(err)
	}
	return startProc(b, append([]string{"TAILPLANE_CONFIG_FILE=" + cfgPath, "TAILPLANE_STATE_DIR=" + filepath.Join(dir, "tp"),
		"TAILPLANE_LOCAL_ADDR=127.0.0.1:0", "TAILPLANE_LOG_LEVEL=warn"}, env...), bin)
}

// startProc runs a process that ends with the benchmark.
func startProc(b *testing.B, env []string, bin string, args ...string) *exec.Cmd {
	b.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	logf, err := os.Create(filepath.Join(b.TempDir(), filepath.Base(bin)+".log"))
	if err != nil {
		b.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
		}
		logf.Close()
	})
	return cmd
}

// peerIP waits until client sees a peer named hostname and returns its IPv4.
func peerIP(b *testing.B, client *tsnet.Server, hostname string) netip.Addr {
	b.Helper()
	lc, err := client.LocalClient()
	if err != nil {
		b.Fatal(err)
	}
	deadline := time.Now().Add(90 * time.Second)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for ; time.Now().Before(deadline); <-tick.C {
		st, err := lc.Status(context.Background())
		if err == nil {
			for _, p := range st.Peer {
				if p.HostName == hostname && len(p.TailscaleIPs) > 0 {
					return p.TailscaleIPs[0]
				}
			}
		}
	}
	b.Fatalf("peer %s never appeared", hostname)
	return netip.Addr{}
}

// rssMB returns the process's current and peak resident set in MiB.
func rssMB(pid int) (cur, peak float64, err error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 2 {
			continue
		}
		kb, _ := strconv.ParseFloat(fields[1], 64)
		switch fields[0] {
		case "VmRSS:":
			cur = kb / 1024
		case "VmHWM:":
			peak = kb / 1024
		}
	}
	return cur, peak, sc.Err()
}

// cpuSeconds returns the user and system CPU time the process has used.
func cpuSeconds(b *testing.B, pid int) float64 {
	b.Helper()
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Fatal(err)
	}
	// The command name (field 2) may hold spaces; fields after its ")"
	// start at field 3, so utime and stime (14 and 15) are at 11 and 12.
	rest := string(stat[strings.LastIndexByte(string(stat), ')')+2:])
	f := strings.Fields(rest)
	utime, _ := strconv.ParseFloat(f[11], 64)
	stime, _ := strconv.ParseFloat(f[12], 64)
	return (utime + stime) / clockTicks
}

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat's times (100 on
// Linux on every architecture Go supports).
const clockTicks = 100
