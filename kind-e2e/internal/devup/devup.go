// Package devup starts `devcluster up` for the test suites and waits for
// its ready line, the one way a suite learns where the cluster's kubeconfig
// and tailnet files are.
//
// It imports only the standard library.
package devup

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
)

// Process is a running `devcluster up`.
type Process struct {
	Cmd *exec.Cmd
	// Exited is closed once the process exited (and its log was closed).
	Exited chan struct{}
	// Ready are the key=value fields of its ready line (kubeconfig,
	// tailnet, registry, ...).
	Ready map[string]string
}

// Start runs `bin up --dir dir args...` with its log (stderr) appended to
// logPath, and waits until it prints its ready line. It fails if the
// process exits first or ctx ends first (the process is then left running
// for the caller's `devcluster down`).
func Start(ctx context.Context, bin, dir, logPath string, args ...string) (*Process, error) {
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("devcluster log: %w", err)
	}
	cmd := exec.Command(bin, append([]string{"up", "--dir", dir}, args...)...)
	cmd.Stderr = logFile
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		logFile.Close()
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("start devcluster up: %w", err)
	}
	p := &Process{Cmd: cmd, Exited: make(chan struct{})}
	ready := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if rest, ok := strings.CutPrefix(sc.Text(), "ready "); ok {
				ready <- rest
			}
		}
	}()
	go func() { _ = cmd.Wait(); logFile.Close(); close(p.Exited) }()
	select {
	case line := <-ready:
		p.Ready = map[string]string{}
		for _, f := range strings.Fields(line) {
			if k, v, ok := strings.Cut(f, "="); ok {
				p.Ready[k] = v
			}
		}
		return p, nil
	case <-p.Exited:
		return p, errors.New("devcluster up exited before it was ready; see " + logPath)
	case <-ctx.Done():
		return p, fmt.Errorf("devcluster up not ready in time (%w); see %s", ctx.Err(), logPath)
	}
}
