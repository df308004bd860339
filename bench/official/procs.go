package official

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// Background is a long-running command of the run (devcluster up, devcluster
// join), in a process group of its own so that SIGINT reaches all of it.
type Background struct {
	cmd    *exec.Cmd
	exited chan struct{}
	err    error
}

// StartBackground starts name args with its output appended to logPath and
// waits until a line of its output contains ready (empty: does not wait),
// at most timeout.
func StartBackground(ctx context.Context, logPath, ready string, timeout time.Duration, name string, args ...string) (*Background, error) {
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(name, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	b := &Background{cmd: cmd, exited: make(chan struct{})}
	seen := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		found := ready == ""
		if found {
			close(seen)
		}
		for sc.Scan() {
			_, _ = logFile.WriteString(sc.Text() + "\n")
			if !found && strings.Contains(sc.Text(), ready) {
				found = true
				close(seen)
			}
		}
		_, _ = io.Copy(io.Discard, pr)
	}()
	go func() { b.err = cmd.Wait(); pw.Close(); logFile.Close(); close(b.exited) }()
	if ready == "" {
		return b, nil
	}
	select {
	case <-seen:
		return b, nil
	case <-b.exited:
		return nil, fmt.Errorf("%s exited before it was ready (%v); see %s", name, b.err, logPath)
	case <-time.After(timeout):
		b.Stop()
		return nil, fmt.Errorf("%s not ready after %s; see %s", name, timeout, logPath)
	case <-ctx.Done():
		b.Stop()
		return nil, ctx.Err()
	}
}

// Stop sends SIGINT to the process group, then SIGKILL after a minute.
func (b *Background) Stop() error {
	if b == nil {
		return nil
	}
	_ = syscall.Kill(-b.cmd.Process.Pid, syscall.SIGINT)
	select {
	case <-b.exited:
	case <-time.After(time.Minute):
		_ = syscall.Kill(-b.cmd.Process.Pid, syscall.SIGKILL)
		<-b.exited
		return errors.New("did not stop within a minute of SIGINT; killed")
	}
	return nil
}
