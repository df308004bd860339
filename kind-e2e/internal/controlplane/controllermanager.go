package controlplane

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// child is a re-executed devcluster component process.
type child struct {
	name   string
	cmd    *exec.Cmd
	exited chan error
}

// startChild runs `self component <name> args...` with its output in
// logsDir/<name>.log. It dies with devcluster (Pdeathsig) however devcluster ends.
func startChild(dir, self, name string, args []string) (*child, error) {
	logFile, err := os.OpenFile(filepath.Join(logsDir(dir), name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(self, append([]string{"component", name}, args...)...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	c := &child{name: name, cmd: cmd, exited: make(chan error, 1)}
	go func() { c.exited <- cmd.Wait(); logFile.Close() }()
	return c, nil
}

// stop sends SIGTERM to the child's process group, then SIGKILL after grace.
func (c *child) stop(grace time.Duration) {
	pgid := c.cmd.Process.Pid
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	select {
	case <-c.exited:
	case <-time.After(grace):
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		<-c.exited
	}
}

// StartControllerManager starts the controllers devcluster runs
// (internal/controllers: those of kube-controller-manager that Deployments,
// StatefulSets, Jobs, Services and namespace deletion need) against the
// running apiserver, as the admin user of the cluster's kubeconfig, in a
// child process named kube-controller-manager.
func (c *Cluster) StartControllerManager(ctx context.Context, self string) error {
	if c.Kubeconfig == "" {
		return fmt.Errorf("controller-manager: the apiserver is not ready yet")
	}
	caFile := filepath.Join(pkiDir(c.Dir), "apiserver-ca.crt")
	bundle := c.CA
	if c.opts.PodTrustsLocalCA {
		bundle = append(append(bytes.TrimRight(bytes.Clone(c.CA), "\n"), '\n'), c.LocalCA.CertPEM...)
	}
	if err := os.WriteFile(caFile, bundle, 0o644); err != nil {
		return err
	}
	args := []string{
		"--kubeconfig=" + c.Kubeconfig,
		"--service-account-private-key-file=" + c.ServiceAccountKey,
		"--root-ca-file=" + caFile,
	}
	kcm, err := startChild(c.Dir, self, "kube-controller-manager", args)
	if err != nil {
		return err
	}
	c.kcm = kcm
	// Fail early if it dies while parsing flags or connecting.
	select {
	case err := <-kcm.exited:
		c.kcm = nil
		return fmt.Errorf("kube-controller-manager exited at start (%v); see %s", err, filepath.Join(logsDir(c.Dir), "kube-controller-manager.log"))
	case <-time.After(500 * time.Millisecond):
	case <-ctx.Done():
		return ctx.Err()
	}
	return nil
}

// ControllerManagerDone reports kube-controller-manager's exit; nil channel
// (never ready) when it was not started.
func (c *Cluster) ControllerManagerDone() <-chan error {
	if c.kcm == nil {
		return nil
	}
	return c.kcm.exited
}
