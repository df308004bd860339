package realnode

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/charmbracelet/log"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/tailplane/tailplane/kind-e2e/internal/pki"
)

// APIServer is how the kubelet reaches the kube-apiserver.
type APIServer struct {
	URL   string
	CA    []byte
	Token string
}

// Config describes one real node.
type Config struct {
	// Name is the Node's name.
	Name string
	// Dir is the cluster directory; the node's state goes under it.
	Dir string
	// Assets is the folder with the node's binaries (devcluster's own).
	Assets string
	API    APIServer
	// LocalCA signs the kubelet's serving certificate and is the CA of the
	// client certificates the kubelet accepts.
	LocalCA *pki.CA
	Client  kubernetes.Interface
	Logger  *log.Logger
	// Imports are images to import into containerd at start, besides the
	// node's own (pause, echo, CoreDNS): the project's images built by
	// deploy/images, so that pods run them without a registry.
	Imports []Import
	// RecordsFile is the hosts-style file of extra names CoreDNS answers
	// ("ADDRESS NAME..."; "": none), read again when it changes.
	RecordsFile string
}

// Node is a running real node.
type Node struct {
	cfg        Config
	lock       *machineLock
	containerd *proc
	kubelet    *proc
	kubeProxy  *proc
	bins       Binaries
	socket     string
	done       chan error
	// stopSync ends syncRecords; synced is closed once it has.
	stopSync context.CancelFunc
	synced   chan struct{}
}

// Start brings up containerd, imports the node's images and starts the
// kubelet; it returns once the Node is Ready.
func Start(ctx context.Context, cfg Config) (*Node, error) {
	bins, err := FindBinaries(cfg.Assets)
	if err != nil {
		return nil, fmt.Errorf("real node: %w", err)
	}
	l, err := lock(cfg.Dir)
	if err != nil {
		return nil, err
	}
	n := &Node{cfg: cfg, lock: l, bins: bins, socket: pathsOf(cfg.Dir).socket, done: make(chan error, 3)}
	if err := n.start(ctx, bins); err != nil {
		n.Stop()
		return nil, err
	}
	return n, nil
}

func (n *Node) start(ctx context.Context, bins Binaries) error {
	dir, logger := n.cfg.Dir, n.cfg.Logger
	logsDir := filepath.Join(dir, "logs")
	for _, d := range []string{logsDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	if err := os.WriteFile(filepath.Join(dir, markerFile), nil, 0o644); err != nil {
		return err
	}
	// A devcluster killed before it could stop its node leaves processes,
	// mounts and cgroups that would confuse the new containerd and kubelet.
	n.cleanup(false)
	if err := PrepareNetwork(); err != nil {
		return err
	}
	p := pathsOf(dir)
	if err := writeCNIConfig(p.cniConf, p.cniIPAM); err != nil {
		return err
	}
	snapshotter := pickSnapshotter(dir)
	start := time.Now()
	c, err := startContainerd(ctx, dir, logsDir, snapshotter, bins)
	if err != nil {
		return err
	}
	n.containerd = c
	go func() { <-c.exited; n.done <- c.err }()
	logger.Info("containerd ready", "snapshotter", snapshotter, "took", time.Since(start).Round(time.Millisecond))

	start = time.Now()
	for _, img := range []struct{ ref, bin string }{{PauseImage, bins.Pause}, {EchoImage, bins.Echo}, {CoreDNSImage, bins.CoreDNS}} {
		archive := filepath.Join(dir, "images", filepath.Base(img.bin)+".tar")
		if err := WriteBinaryImage(archive, img.ref, img.bin); err != nil {
			return err
		}
		if err := importImage(ctx, bins.Ctr, n.socket, archive); err != nil {
			return err
		}
	}
	logger.Info("images imported", "took", time.Since(start).Round(time.Millisecond))
	if len(n.cfg.Imports) > 0 {
		start = time.Now()
		archives, names, err := importArchives(n.cfg.Imports, filepath.Join(dir, "images", "import"))
		if err != nil {
			return err
		}
		for _, a := range archives {
			if err := importImage(ctx, bins.Ctr, n.socket, a); err != nil {
				return err
			}
		}
		logger.Info("images imported (--import)", "archives", len(archives), "names", names, "took", time.Since(start).Round(time.Millisecond))
	}

	args, ports, err := writeKubeletFiles(dir, n.cfg.Name, n.cfg.API, n.cfg.LocalCA, n.socket)
	if err != nil {
		return err
	}
	start = time.Now()
	k, err := startProc(logsDir, "kubelet", bins.Kubelet, args, []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"})
	if err != nil {
		return err
	}
	n.kubelet = k
	if err := n.waitReady(ctx, k); err != nil {
		return err
	}
	go func() { <-k.exited; n.done <- k.err }()
	logger.Info("kubelet ready", "node", n.cfg.Name, "took", time.Since(start).Round(time.Millisecond))

	args, err = writeKubeProxyFiles(dir, n.cfg.Name, n.cfg.API, ports)
	if err != nil {
		return err
	}
	kp, err := startProc(logsDir, "kube-proxy", bins.KubeProxy, args, []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"})
	if err != nil {
		return err
	}
	n.kubeProxy = kp
	go func() { <-kp.exited; n.done <- kp.err }()
	// The suites wait for DNS where they need it; up does not.
	if err := applyCoreDNS(ctx, n.cfg.Client); err != nil {
		return err
	}
	if n.cfg.RecordsFile != "" {
		syncCtx, stop := context.WithCancel(context.Background())
		n.stopSync, n.synced = stop, make(chan struct{})
		go func() { defer close(n.synced); syncRecords(syncCtx, n.cfg.Client, n.cfg.RecordsFile, logger) }()
	}
	return nil
}

// pickSnapshotter is overlayfs where an overlay mount works in dir (it does
// on ext4 and xfs), else native (full copies, slower but works anywhere).
func pickSnapshotter(dir string) string {
	base := filepath.Join(dir, "containerd", "overlay-probe")
	defer os.RemoveAll(base)
	lower, upper, work, merged := filepath.Join(base, "l"), filepath.Join(base, "u"), filepath.Join(base, "w"), filepath.Join(base, "m")
	for _, d := range []string{lower, upper, work, merged} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return "native"
		}
	}
	if err := syscall.Mount("overlay", merged, "overlay", 0, "lowerdir="+lower+",upperdir="+upper+",workdir="+work); err != nil {
		return "native"
	}
	_ = syscall.Unmount(merged, 0)
	return "overlayfs"
}

// waitReady waits for the kubelet to register the Node, sets the Node up
// as a cloud provider would (initializeNode), and waits for it to be Ready.
func (n *Node) waitReady(ctx context.Context, k *proc) error {
	// Heartbeat times have whole seconds.
	started := time.Now().Truncate(time.Second)
	deadline := time.Now().Add(3 * time.Minute)
	var last error
	for time.Now().Before(deadline) {
		node, err := n.cfg.Client.CoreV1().Nodes().Get(ctx, n.cfg.Name, metav1.GetOptions{})
		if err == nil {
			err = initializeNode(ctx, n.cfg.Client, node)
		}
		if err == nil {
			last = errors.New("not Ready yet")
			for _, c := range node.Status.Conditions {
				if c.Type == corev1.NodeReady {
					// A resumed cluster's Node is Ready from the last run
					// until its status goes stale: only a heartbeat from
					// this kubelet counts.
					if c.Status == corev1.ConditionTrue && !c.LastHeartbeatTime.Time.Before(started) &&
						node.Status.NodeInfo.ContainerRuntimeVersion != "process://devcluster" {
						return nil
					}
					last = fmt.Errorf("Ready=%s: %s", c.Status, c.Message)
				}
			}
		} else {
			last = err
		}
		select {
		case <-k.exited:
			return k.err
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
	return fmt.Errorf("node %s not Ready after 3m (%v); see %s", n.cfg.Name, last, filepath.Join(n.cfg.Dir, "logs", "kubelet.log"))
}

// Done reports the first exit of containerd or the kubelet.
func (n *Node) Done() <-chan error { return n.done }

// Stop ends the node: the kubelet first (so it restarts nothing), then
// every pod through the CRI, containerd, and whatever is left (shims,
// container processes, mounts, cgroups, the bridge).
func (n *Node) Stop() {
	start := time.Now()
	if n.stopSync != nil {
		n.stopSync()
		<-n.synced
	}
	n.kubeProxy.stop(10 * time.Second)
	n.kubelet.stop(10 * time.Second)
	if n.containerd != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		if err := removePods(ctx, n.socket); err != nil {
			n.cfg.Logger.Warn("remove pods", "err", err)
		}
		cancel()
		n.containerd.stop(10 * time.Second)
	}
	n.cleanup(true)
	n.lock.release()
	n.cfg.Logger.Info("node stopped", "took", time.Since(start).Round(time.Millisecond))
}

// cleanup is Cleanup with the lock already held; network says whether to
// remove the bridge and kube-proxy's rules too (not before a start).
func (n *Node) cleanup(network bool) {
	dir := n.cfg.Dir
	killProcesses(func(cmdline, cgroups string) bool {
		return nodeProcess(cmdline, dir) || containsKubepods(cgroups)
	})
	var errs []error
	errs = append(errs, unmountUnder(dir), removeCgroups())
	if network {
		errs = append(errs, cleanupKubeProxy(n.bins.KubeProxy), removeBridge())
		cleanupKubeletChains()
	}
	if err := errors.Join(errs...); err != nil {
		n.cfg.Logger.Warn("clean up the real node", "err", err)
	}
}
