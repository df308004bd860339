package realnode

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// proc is one child process of the real node (containerd, kubelet), its
// output in logs/<name>.log.
type proc struct {
	name string
	cmd  *exec.Cmd
	// exited is closed when the process has exited; err says how.
	exited chan struct{}
	err    error
}

// startProc starts bin with args and env added to devcluster's environment.
// The child gets its own process group and dies with devcluster
// (Pdeathsig) however devcluster ends.
func startProc(logsDir, name, bin string, args, env []string) (*proc, error) {
	logFile, err := os.OpenFile(filepath.Join(logsDir, name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, exited: make(chan struct{})}
	go func() {
		err := cmd.Wait()
		logFile.Close()
		p.err = fmt.Errorf("%s exited: %v (log: %s)", name, err, logFile.Name())
		close(p.exited)
	}()
	return p, nil
}

// stop sends SIGTERM to the process group, then SIGKILL after grace, and
// waits for the exit.
func (p *proc) stop(grace time.Duration) {
	if p == nil {
		return
	}
	pgid := p.cmd.Process.Pid
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(grace):
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		<-p.exited
	}
}
