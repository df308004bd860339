package node

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/charmbracelet/log"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// podWorker runs one pod: its IP, volumes, containers and status.
type podWorker struct {
	n   *Node
	log *log.Logger
	dir string // pods/<uid>

	mu         sync.Mutex
	pod        *corev1.Pod
	ip         string
	inits      []*containerState
	containers []*containerState
	initsDone  bool
	podErr     string // a pod-level problem (volumes), shown as a condition
	// resolvConf is the pod's resolv.conf, bound at /etc/resolv.conf in
	// every container ("": the host's file).
	resolvConf string

	dirty  chan struct{}
	cancel context.CancelFunc
	done   chan struct{}
}

func (pw *podWorker) key() string { return pw.pod.Namespace + "/" + pw.pod.Name }

func (pw *podWorker) logPath(container string) string {
	return filepath.Join(pw.dir, "logs", container+".log")
}

func (pw *podWorker) previousLogPath(container string) string {
	return filepath.Join(pw.dir, "logs", container+".previous.log")
}

func (pw *podWorker) markDirty() {
	select {
	case pw.dirty <- struct{}{}:
	default:
	}
}

func (pw *podWorker) setWaiting(cs *containerState, reason, msg string) {
	pw.mu.Lock()
	cs.state = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: msg}}
	pw.mu.Unlock()
	pw.markDirty()
}

// update takes a newer copy of the pod from the informer.
func (pw *podWorker) update(pod *corev1.Pod) {
	pw.mu.Lock()
	pw.pod = pod
	pw.mu.Unlock()
}

// run drives the pod until ctx ends (the pod was deleted or the node stops).
func (pw *podWorker) run(ctx context.Context) {
	defer close(pw.done)
	statusCtx, stopStatus := context.WithCancel(context.Background())
	statusDone := make(chan struct{})
	go func() { defer close(statusDone); pw.statusLoop(statusCtx) }()
	defer func() { stopStatus(); <-statusDone }()

	pw.mu.Lock()
	for i := range pw.pod.Spec.InitContainers {
		pw.inits = append(pw.inits, pw.newContainer(pw.pod.Spec.InitContainers[i], true))
	}
	for i := range pw.pod.Spec.Containers {
		pw.containers = append(pw.containers, pw.newContainer(pw.pod.Spec.Containers[i], false))
	}
	pw.mu.Unlock()
	pw.markDirty()

	for _, cs := range append(append([]*containerState{}, pw.inits...), pw.containers...) {
		if cs.binary == "" {
			// Unknown image: the pod waits; nothing is started, nothing else is affected.
			<-ctx.Done()
			return
		}
	}
	if err := os.MkdirAll(filepath.Join(pw.dir, "logs"), 0o755); err != nil {
		pw.log.Error("pod folder", "pod", pw.key(), "err", err)
		return
	}
	vw := &volumeWriter{client: pw.n.client, pod: pw.pod, podIP: pw.ip, root: filepath.Join(pw.dir, "volumes")}
	for {
		err := vw.writeAll(ctx)
		pw.mu.Lock()
		pw.podErr = ""
		if err != nil {
			pw.podErr = err.Error()
		}
		pw.mu.Unlock()
		pw.markDirty()
		if err == nil {
			break
		}
		pw.log.Warn("volumes not ready", "pod", pw.key(), "err", err)
		if !sleepCtx(ctx, 2*time.Second) {
			return
		}
	}
	go pw.refreshVolumes(ctx, vw)
	if content, ok := resolvConf(pw.pod, pw.n.cfg.ClusterDNS, pw.n.cfg.clusterDomain()); ok {
		path := filepath.Join(pw.dir, "resolv.conf")
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			pw.log.Warn("resolv.conf", "pod", pw.key(), "err", err)
		} else {
			pw.mu.Lock()
			pw.resolvConf = path
			pw.mu.Unlock()
		}
	}
	for _, m := range pw.allMounts() {
		st, err := os.Stat(m.Source)
		if err != nil {
			continue
		}
		if err := pw.n.mounts.claim(m.Target, !st.IsDir()); err != nil {
			pw.log.Warn("mountpoint", "pod", pw.key(), "path", m.Target, "err", err)
			continue
		}
		defer pw.n.mounts.release(m.Target)
	}

	for _, cs := range pw.inits {
		if code := pw.runContainer(ctx, cs); code != 0 {
			return
		}
	}
	pw.mu.Lock()
	pw.initsDone = true
	pw.mu.Unlock()
	var wg sync.WaitGroup
	for _, cs := range pw.containers {
		wg.Add(1)
		go func() { defer wg.Done(); pw.runContainer(ctx, cs) }()
	}
	wg.Wait()
}

// allMounts are the mounts of every container, init containers included.
func (pw *podWorker) allMounts() []Mount {
	var out []Mount
	for _, cs := range append(append([]*containerState{}, pw.inits...), pw.containers...) {
		out = append(out, pw.mounts(cs)...)
	}
	return out
}

// refreshVolumes rewrites volumes each minute: new tokens, changed
// secrets and config maps, as the kubelet does.
func (pw *podWorker) refreshVolumes(ctx context.Context, vw *volumeWriter) {
	for sleepCtx(ctx, time.Minute) {
		if err := vw.writeAll(ctx); err != nil && ctx.Err() == nil {
			pw.log.Warn("refresh volumes", "pod", pw.key(), "err", err)
		}
	}
}

func (pw *podWorker) newContainer(c corev1.Container, init bool) *containerState {
	cs := &containerState{spec: c, init: init}
	for _, old := range append(append([]corev1.ContainerStatus{}, pw.pod.Status.InitContainerStatuses...), pw.pod.Status.ContainerStatuses...) {
		if old.Name == c.Name {
			// A resumed cluster keeps counting restarts.
			cs.restartCount = old.RestartCount
			cs.lastState = old.LastTerminationState
		}
	}
	bin, err := pw.n.cfg.Images.Resolve(c.Image)
	if err != nil {
		cs.state = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: ErrImageNotKnown, Message: err.Error()}}
		return cs
	}
	cs.binary = bin
	cs.state = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}
	return cs
}

// startProbes runs the readiness and liveness probes of a running container.
func (pw *podWorker) startProbes(ctx context.Context, cs *containerState, liveFailed chan<- struct{}) {
	if p := cs.spec.ReadinessProbe; p != nil {
		go pw.probeLoop(ctx, cs, newProber(p, false), func(ok bool) {
			pw.mu.Lock()
			cs.ready = ok
			pw.mu.Unlock()
			pw.markDirty()
		})
	}
	if p := cs.spec.LivenessProbe; p != nil {
		go pw.probeLoop(ctx, cs, newProber(p, true), func(ok bool) {
			if !ok {
				select {
				case liveFailed <- struct{}{}:
				default:
				}
			}
		})
	}
}

func (pw *podWorker) probeLoop(ctx context.Context, cs *containerState, pr *prober, onChange func(bool)) {
	if !sleepCtx(ctx, time.Duration(pr.probe.InitialDelaySeconds)*time.Second) {
		return
	}
	// The first readiness check comes quickly so that Ready is not held back
	// by a whole period.
	next := 200 * time.Millisecond
	for sleepCtx(ctx, next) {
		err := probeOnce(ctx, pr.probe, &cs.spec, pw.ip, func(ctx context.Context, cmd []string) error {
			return pw.execProbe(ctx, cs, cmd)
		})
		if ctx.Err() != nil {
			return
		}
		if pr.record(err) {
			onChange(pr.result)
		}
		next = pr.period()
		if !pr.everSucceeded && pr.probe.PeriodSeconds >= 2 {
			next = time.Second
		}
	}
}

// statusLoop writes the pod status whenever something changed.
func (pw *podWorker) statusLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			pw.writeStatus(context.Background())
			return
		case <-pw.dirty:
		}
		if !sleepCtx(ctx, 50*time.Millisecond) { // coalesce bursts
			pw.writeStatus(context.Background())
			return
		}
		pw.writeStatus(ctx)
	}
}

func (pw *podWorker) writeStatus(ctx context.Context) {
	for attempt := 0; attempt < 5; attempt++ {
		pw.mu.Lock()
		pod := pw.pod.DeepCopy()
		pod.Status = pw.buildStatus()
		pw.mu.Unlock()
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		updated, err := pw.n.client.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, pod, metav1.UpdateOptions{})
		cancel()
		if err == nil {
			pw.update(updated)
			return
		}
		latest, gerr := pw.n.client.CoreV1().Pods(pod.Namespace).Get(context.Background(), pod.Name, metav1.GetOptions{})
		if gerr != nil || latest.UID != pod.UID {
			return // gone
		}
		pw.update(latest)
		if attempt == 4 {
			pw.log.Warn("pod status", "pod", pw.key(), "err", fmt.Errorf("update status: %w", err))
		}
	}
}
