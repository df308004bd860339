package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// containerState is what the node knows about one container; guarded by the
// pod worker's mutex.
type containerState struct {
	spec         corev1.Container
	init         bool
	binary       string
	state        corev1.ContainerState
	lastState    corev1.ContainerState
	ready        bool
	started      bool
	restartCount int32
	pid          int
	env          []string // of the current run, for exec probes
}

// maxBackoff caps the restart delay; shorter than the kubelet's 5 minutes
// because a developer cluster should recover quickly once a fix lands.
const maxBackoff = 30 * time.Second

// runContainer runs one container until ctx ends (pod deleted) or, for
// containers that may not restart, until it exits. It returns the last exit
// code.
func (pw *podWorker) runContainer(ctx context.Context, cs *containerState) int {
	backoff := time.Second
	for {
		if ctx.Err() != nil {
			return -1
		}
		startedAt := time.Now()
		code, err := pw.runOnce(ctx, cs)
		if err != nil {
			pw.setWaiting(cs, "CreateContainerConfigError", err.Error())
			pw.log.Warn("container not started", "pod", pw.key(), "container", cs.spec.Name, "err", err)
			if !sleepCtx(ctx, 3*time.Second) {
				return -1
			}
			continue
		}
		if ctx.Err() != nil || !pw.shouldRestart(cs, code) {
			return code
		}
		if time.Since(startedAt) > 2*time.Minute {
			backoff = time.Second
		}
		pw.mu.Lock()
		cs.lastState = cs.state
		cs.state = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{
			Reason:  "CrashLoopBackOff",
			Message: fmt.Sprintf("back-off %s restarting failed container=%s pod=%s", backoff, cs.spec.Name, pw.key()),
		}}
		pw.mu.Unlock()
		pw.markDirty()
		if !sleepCtx(ctx, backoff) {
			return code
		}
		pw.mu.Lock()
		cs.restartCount++
		pw.mu.Unlock()
		backoff = min(backoff*2, maxBackoff)
	}
}

func (pw *podWorker) shouldRestart(cs *containerState, code int) bool {
	switch pw.pod.Spec.RestartPolicy {
	case corev1.RestartPolicyNever:
		return false
	case corev1.RestartPolicyOnFailure:
		return code != 0
	}
	// Always: init containers still only repeat until they succeed.
	return !cs.init || code != 0
}

// runOnce starts the container's process, probes it, and waits for it to
// exit or for ctx to end (then it stops it within the grace period).
func (pw *podWorker) runOnce(ctx context.Context, cs *containerState) (int, error) {
	env, err := containerEnv(ctx, pw.n.client, pw.pod, &cs.spec, pw.ip, pw.n.cfg.APIServerHost, pw.n.cfg.APIServerPort)
	if err != nil {
		return 0, err
	}
	cmd, logFile, err := pw.startProcess(cs, env)
	if err != nil {
		return 0, err
	}
	defer logFile.Close()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	pgid := cmd.Process.Pid
	pw.n.trackGroup(pgid, true)
	defer pw.n.trackGroup(pgid, false)

	pw.mu.Lock()
	cs.pid = pgid
	cs.env = env
	cs.started = true
	cs.ready = cs.spec.ReadinessProbe == nil
	cs.state = corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.Now()}}
	pw.mu.Unlock()
	pw.markDirty()

	runCtx, stopProbes := context.WithCancel(ctx)
	liveFailed := make(chan struct{}, 1)
	if !cs.init {
		pw.startProbes(runCtx, cs, liveFailed)
	}
	var waitErr error
	reason := ""
	select {
	case waitErr = <-exited:
	case <-liveFailed:
		reason = "Liveness probe failed"
		waitErr = pw.terminate(pgid, exited, pw.grace(cs))
	case <-ctx.Done():
		waitErr = pw.terminate(pgid, exited, pw.grace(cs))
	}
	stopProbes()
	// Background children of the container die with it.
	_ = syscall.Kill(-pgid, syscall.SIGKILL)

	code := exitCode(waitErr)
	term := &corev1.ContainerStateTerminated{ExitCode: int32(code), FinishedAt: metav1.Now(), Reason: "Completed"}
	if cs.state.Running != nil {
		term.StartedAt = cs.state.Running.StartedAt
	}
	if code != 0 {
		term.Reason = "Error"
	}
	if reason != "" {
		term.Message = reason
	}
	pw.mu.Lock()
	cs.ready = false
	cs.pid = 0
	cs.state = corev1.ContainerState{Terminated: term}
	pw.mu.Unlock()
	pw.markDirty()
	pw.log.Info("container exited", "pod", pw.key(), "container", cs.spec.Name, "code", code, "reason", reason)
	return code, nil
}

// terminate sends SIGTERM to the container's process group, then SIGKILL
// once grace has passed.
func (pw *podWorker) terminate(pgid int, exited <-chan error, grace time.Duration) error {
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	select {
	case err := <-exited:
		return err
	case <-time.After(grace):
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		return <-exited
	}
}

func (pw *podWorker) grace(cs *containerState) time.Duration {
	pw.mu.Lock()
	defer pw.mu.Unlock()
	g := int64(30)
	if pw.pod.DeletionGracePeriodSeconds != nil {
		g = *pw.pod.DeletionGracePeriodSeconds
	} else if pw.pod.Spec.TerminationGracePeriodSeconds != nil {
		g = *pw.pod.Spec.TerminationGracePeriodSeconds
	}
	d := time.Duration(g) * time.Second
	if pw.n.stopping.Load() {
		d = min(d, shutdownGrace)
	}
	return d
}

func exitCode(err error) int {
	if err == nil {
		return 0
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal())
		}
		return ee.ExitCode()
	}
	return 1
}

// startProcess re-executes devcluster as pod-init in a new mount namespace;
// pod-init binds the volumes and execs the container binary.
func (pw *podWorker) startProcess(cs *containerState, env []string) (*exec.Cmd, *os.File, error) {
	spec := InitSpec{Binary: cs.binary, Env: env, Dir: cs.spec.WorkingDir, Argv: argv(cs.binary, cs.spec.Command, cs.spec.Args, env)}
	if len(cs.spec.Command) > 0 {
		if host, err := exec.LookPath(cs.spec.Command[0]); err == nil && filepath.Base(host) != filepath.Base(cs.binary) {
			// Commands that exist on the host (sh, sleep, ...) run as they are.
			spec.Binary = host
		}
	}
	spec.Mounts = pw.mounts(cs)
	specPath := filepath.Join(pw.dir, cs.spec.Name+".init.json")
	b, _ := json.Marshal(spec)
	if err := os.WriteFile(specPath, b, 0o600); err != nil {
		return nil, nil, err
	}
	logPath := pw.logPath(cs.spec.Name)
	if _, err := os.Stat(logPath); err == nil {
		_ = os.Rename(logPath, pw.previousLogPath(cs.spec.Name))
	}
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, nil, err
	}
	cmd := exec.Command(pw.n.cfg.Self, "component", "pod-init", specPath)
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Unshareflags: syscall.CLONE_NEWNS,
		Setpgid:      true,
		Pdeathsig:    syscall.SIGKILL,
	}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, nil, fmt.Errorf("start %s: %w", cs.binary, err)
	}
	return cmd, logFile, nil
}

// mounts are the bind mounts of a container's volumeMounts, then the pod's
// resolv.conf at /etc/resolv.conf (as the kubelet mounts it).
func (pw *podWorker) mounts(cs *containerState) []Mount {
	var out []Mount
	for _, vm := range cs.spec.VolumeMounts {
		src := filepath.Join(pw.dir, "volumes", vm.Name)
		if vm.SubPath != "" {
			src = filepath.Join(src, vm.SubPath)
		}
		out = append(out, Mount{Source: src, Target: vm.MountPath, ReadOnly: vm.ReadOnly})
	}
	pw.mu.Lock()
	resolv := pw.resolvConf
	pw.mu.Unlock()
	if resolv != "" {
		out = append(out, Mount{Source: resolv, Target: hostResolvConf})
	}
	return out
}

// execProbe runs an exec probe's command as the container sees the world:
// through pod-init, in a mount namespace with the container's volumes and
// env. Exit status 0 is success.
func (pw *podWorker) execProbe(ctx context.Context, cs *containerState, command []string) error {
	if len(command) == 0 {
		return fmt.Errorf("exec probe without a command")
	}
	bin, err := exec.LookPath(command[0])
	if err != nil {
		return fmt.Errorf("exec probe: %w", err)
	}
	pw.mu.Lock()
	env := cs.env
	pw.mu.Unlock()
	spec := InitSpec{Binary: bin, Argv: command, Env: env, Dir: cs.spec.WorkingDir, Mounts: pw.mounts(cs)}
	specPath := filepath.Join(pw.dir, cs.spec.Name+".probe.json")
	b, _ := json.Marshal(spec)
	if err := os.WriteFile(specPath, b, 0o600); err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, pw.n.cfg.Self, "component", "pod-init", specPath)
	cmd.SysProcAttr = &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS, Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("exec probe %v: %w: %s", command, err, out)
	}
	return nil
}

// argv builds the process arguments: command replaces the image entrypoint
// (its first element names the program), args follow; $(VAR) is expanded.
func argv(binary string, command, args, env []string) []string {
	vars := map[string]string{}
	for _, kv := range env {
		for i := 0; i < len(kv); i++ {
			if kv[i] == '=' {
				vars[kv[:i]] = kv[i+1:]
				break
			}
		}
	}
	out := []string{binary}
	if len(command) > 0 {
		out[0] = command[0]
		for _, c := range command[1:] {
			out = append(out, expand(c, vars))
		}
	}
	for _, a := range args {
		out = append(out, expand(a, vars))
	}
	return out
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
