//go:build conformance

package gatewayconformance

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// cluster is devcluster with the real node and the operator installed, run
// by devinstall --up as `go tool task dev` runs it.
type cluster struct {
	// dir is devcluster's folder (kubeconfig, tailnet.env); log is the
	// file devinstall and devcluster write to.
	dir, log string
	// devcluster is the assets' binary that runs the cluster.
	devcluster string
	cmd        *exec.Cmd
	exited     chan struct{}
	exitErr    error
}

// startCluster builds devinstall, starts devcluster (the assets' binary)
// with the real node and the given image archives and layouts, and returns
// once devinstall says the operator is installed. The cluster is stopped and
// its folder removed when the test ends.
func startCluster(ctx context.Context, t *testing.T, root, assets string, imports []string) *cluster {
	t.Helper()
	start := time.Now()
	work, err := os.MkdirTemp("", "devcluster-gateway-conformance-")
	if err != nil {
		t.Fatal(err)
	}
	devinstall := filepath.Join(work, "devinstall")
	build := exec.CommandContext(ctx, "go", "build", "-o", devinstall, "./deploy/manifests/devinstall")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build devinstall: %v\n%s", err, out)
	}
	c := &cluster{dir: filepath.Join(work, "cluster"), log: work + ".log", devcluster: filepath.Join(assets, "devcluster"), exited: make(chan struct{})}
	args := []string{"--dir", c.dir, "--up", c.devcluster, "--bin", filepath.Join(root, "bin"), "--", "--node", "real"}
	for _, im := range imports {
		args = append(args, "--import", im)
	}
	logFile, err := os.Create(c.log)
	if err != nil {
		t.Fatal(err)
	}
	// Not CommandContext: the cluster is stopped by SIGINT to its process
	// group (Ctrl-C, devinstall's documented stop), never killed first.
	c.cmd = exec.Command(devinstall, args...)
	c.cmd.Dir = root
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	c.cmd.Stderr = logFile
	stdout, err := c.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.cmd.Start(); err != nil {
		t.Fatalf("start devinstall: %v", err)
	}
	t.Cleanup(func() { c.stop(t, work) })
	installed := make(chan struct{})
	go func() {
		lines := bufio.NewScanner(stdout)
		once := false
		for lines.Scan() {
			_, _ = logFile.WriteString(lines.Text() + "\n")
			if !once && strings.Contains(lines.Text(), "operator is installed") {
				once = true
				close(installed)
			}
		}
	}()
	go func() { c.exitErr = c.cmd.Wait(); _ = logFile.Close(); close(c.exited) }()
	select {
	case <-installed:
	case <-c.exited:
		t.Fatalf("devinstall exited before the operator was installed (%v); see %s", c.exitErr, c.log)
	case <-ctx.Done():
		t.Fatalf("the operator was not installed in time; see %s", c.log)
	}
	t.Logf("TIME devcluster up (real node) and the chart installed: %s", time.Since(start).Round(time.Second))
	// The tsnet client dials the control server over TLS on the bridge
	// address, whose certificate devcluster's ACME CA signs (docs/e2e.md).
	t.Setenv("SSL_CERT_FILE", filepath.Join(c.dir, "acme-ca.pem"))
	return c
}

// stop is Ctrl-C to devinstall's process group, then `devcluster down`
// for anything left; the folder goes, the log stays when the test failed.
func (c *cluster) stop(t *testing.T, work string) {
	_ = syscall.Kill(-c.cmd.Process.Pid, syscall.SIGINT)
	timer := time.NewTimer(time.Minute)
	defer timer.Stop()
	select {
	case <-c.exited:
	case <-timer.C:
		t.Logf("devinstall did not stop within a minute of SIGINT; killing it")
		_ = syscall.Kill(-c.cmd.Process.Pid, syscall.SIGKILL)
		<-c.exited
	}
	// The test's context is done by now: down gets its own.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if out, err := exec.CommandContext(ctx, c.devcluster, "down", "--dir", c.dir).CombinedOutput(); err != nil {
		t.Logf("devcluster down: %v\n%s", err, out)
	}
	if err := os.RemoveAll(work); err != nil {
		t.Logf("remove %s: %v", work, err)
	}
	if !t.Failed() {
		_ = os.Remove(c.log)
		return
	}
	t.Logf("devinstall and devcluster log: %s", c.log)
}

// env reads devcluster's tailnet.env (KEY=VALUE lines).
func (c *cluster) env() (map[string]string, error) {
	b, err := os.ReadFile(filepath.Join(c.dir, "tailnet.env"))
	if err != nil {
		return nil, fmt.Errorf("tailnet.env: %w", err)
	}
	env := map[string]string{}
	for line := range strings.SplitSeq(string(b), "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), "="); ok && !strings.HasPrefix(k, "#") {
			env[k] = v
		}
	}
	if env["TS_CONTROL_URL"] == "" {
		return nil, errors.New("tailnet.env has no TS_CONTROL_URL")
	}
	return env, nil
}
