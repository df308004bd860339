package node

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/charmbracelet/log"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/tailplane/tailplane/kind-e2e/internal/pki"
)

// NodeIP is the node's address: pods reach the host (and the apiserver) on it.
const NodeIP = "127.0.0.1"

// Config describes one process node.
type Config struct {
	Name string
	// Dir holds pod folders (volumes, logs) and the process-group list.
	Dir string
	// Self is the devcluster binary, re-executed as pod-init.
	Self   string
	Images ImageMap
	// APIServerHost and APIServerPort are what pods get as
	// KUBERNETES_SERVICE_HOST/PORT.
	APIServerHost, APIServerPort string
	// LocalCA signs the log endpoint's serving certificate and the
	// apiserver's client certificate.
	LocalCA *pki.CA
	// PodSubnet is where pod IPs come from (see ClaimPodSubnet).
	PodSubnet netip.Prefix
	// ClusterDNS is the nameserver of pods with dnsPolicy ClusterFirst
	// (none: they keep the host's resolv.conf), and ClusterDomain their
	// search domain (default cluster.local).
	ClusterDNS    netip.Addr
	ClusterDomain string
	Logger        *log.Logger
}

func (c Config) clusterDomain() string {
	if c.ClusterDomain == "" {
		return "cluster.local"
	}
	return c.ClusterDomain
}

// Node is a running process node.
type Node struct {
	cfg    Config
	client kubernetes.Interface
	log    *log.Logger
	ipam   *ipam

	mu      sync.Mutex
	workers map[types.UID]*podWorker
	wg      sync.WaitGroup
	// stopping caps grace periods while the node shuts down.
	stopping atomic.Bool
	mounts   *mountpoints
}

// shutdownGrace caps each container's grace period when the node stops.
const shutdownGrace = 10 * time.Second

// New returns a node; call Run to start it.
func New(client kubernetes.Interface, cfg Config) *Node {
	return &Node{cfg: cfg, client: client, log: cfg.Logger, ipam: newIPAM(cfg.PodSubnet),
		mounts: newMountpoints(cfg.Dir), workers: map[types.UID]*podWorker{}}
}

// Run registers the node, serves logs, schedules and runs pods until ctx
// ends; then it stops every pod's processes (with their grace periods capped
// at 10 s) and returns.
func (n *Node) Run(ctx context.Context, ready chan<- struct{}) error {
	for _, d := range []string{n.podsDir(), n.groupsDir()} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	n.KillLeftovers()
	RemoveRecordedMountpoints(n.cfg.Dir)
	logs, err := n.startLogServer(ctx)
	if err != nil {
		return err
	}
	if err := n.register(ctx, logs.port); err != nil {
		return err
	}
	go n.heartbeat(ctx)
	go n.schedule(ctx)

	factory := informers.NewSharedInformerFactoryWithOptions(n.client, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", n.cfg.Name).String()
		}))
	podInformer := factory.Core().V1().Pods().Informer()
	_, _ = podInformer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { n.onPod(ctx, obj.(*corev1.Pod)) },
		UpdateFunc: func(_, obj any) { n.onPod(ctx, obj.(*corev1.Pod)) },
		DeleteFunc: func(obj any) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			if p, ok := obj.(*corev1.Pod); ok {
				n.stopPod(p.UID, false)
			}
		},
	})
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	if ready != nil {
		close(ready)
	}
	<-ctx.Done()
	n.stopping.Store(true)
	n.mu.Lock()
	for _, w := range n.workers {
		w.cancel()
	}
	n.mu.Unlock()
	n.wg.Wait()
	logs.close()
	return nil
}

func (n *Node) podsDir() string   { return filepath.Join(n.cfg.Dir, "pods") }
func (n *Node) groupsDir() string { return filepath.Join(n.cfg.Dir, "run", "pgids") }

// trackGroup records the process groups of running containers on disk, so
// that `devcluster down` can end them even if devcluster itself was killed.
func (n *Node) trackGroup(pgid int, running bool) {
	p := filepath.Join(n.groupsDir(), strconv.Itoa(pgid))
	if running {
		_ = os.WriteFile(p, nil, 0o644)
	} else {
		_ = os.Remove(p)
	}
}

// KillLeftovers ends process groups recorded by an earlier run of this
// cluster directory that are still alive.
func (n *Node) KillLeftovers() { KillRecordedGroups(n.cfg.Dir) }

// KillRecordedGroups SIGKILLs every process group listed under dir/run/pgids.
func KillRecordedGroups(dir string) {
	groups := filepath.Join(dir, "run", "pgids")
	entries, _ := os.ReadDir(groups)
	for _, e := range entries {
		if pgid, err := strconv.Atoi(e.Name()); err == nil && pgid > 1 {
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
		}
		_ = os.Remove(filepath.Join(groups, e.Name()))
	}
}

func (n *Node) onPod(ctx context.Context, pod *corev1.Pod) {
	n.mu.Lock()
	w, ok := n.workers[pod.UID]
	n.mu.Unlock()
	if ok {
		w.update(pod)
		if pod.DeletionTimestamp != nil {
			n.stopPod(pod.UID, true)
		}
		return
	}
	if pod.DeletionTimestamp != nil {
		n.finishDeletion(pod.Namespace, pod.Name, pod.UID)
		return
	}
	if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		return
	}
	ip, err := n.ipam.claim(string(pod.UID), pod.Status.PodIP)
	if err != nil {
		n.log.Error("pod IP", "pod", pod.Namespace+"/"+pod.Name, "err", err)
		return
	}
	wctx, cancel := context.WithCancel(context.Background())
	w = &podWorker{n: n, log: n.log, dir: filepath.Join(n.podsDir(), string(pod.UID)), pod: pod, ip: ip,
		dirty: make(chan struct{}, 1), cancel: cancel, done: make(chan struct{})}
	n.mu.Lock()
	n.workers[pod.UID] = w
	n.mu.Unlock()
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		w.run(wctx)
	}()
}

// stopPod ends a pod's containers (each within its grace period); when the
// pod is being deleted it then removes the pod object, as the kubelet does.
func (n *Node) stopPod(uid types.UID, deleting bool) {
	n.mu.Lock()
	w, ok := n.workers[uid]
	if ok {
		delete(n.workers, uid)
	}
	n.mu.Unlock()
	if !ok {
		return
	}
	w.cancel()
	go func() {
		<-w.done
		n.ipam.release(string(uid))
		_ = os.RemoveAll(w.dir)
		if deleting {
			n.finishDeletion(w.pod.Namespace, w.pod.Name, uid)
		}
	}()
}

func (n *Node) finishDeletion(ns, name string, uid types.UID) {
	zero := int64(0)
	err := n.client.CoreV1().Pods(ns).Delete(context.Background(), name, metav1.DeleteOptions{
		GracePeriodSeconds: &zero,
		Preconditions:      &metav1.Preconditions{UID: &uid},
	})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		n.log.Warn("delete pod", "pod", ns+"/"+name, "err", err)
	}
}

// register creates or updates the Node object as Ready.
func (n *Node) register(ctx context.Context, logPort int) error {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.cfg.Name, Labels: map[string]string{
		"kubernetes.io/hostname": n.cfg.Name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
		"node-role.kubernetes.io/control-plane": "",
	}}}
	if _, err := n.client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("register node: %w", err)
	}
	return n.updateNodeStatus(ctx, logPort)
}

func (n *Node) updateNodeStatus(ctx context.Context, logPort int) error {
	node, err := n.client.CoreV1().Nodes().Get(ctx, n.cfg.Name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("get node: %w", err)
	}
	now := metav1.Now()
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("8"),
		corev1.ResourceMemory: resource.MustParse("16Gi"),
		corev1.ResourcePods:   resource.MustParse("250"),
	}
	node.Status.Capacity = capacity
	node.Status.Allocatable = capacity
	node.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: NodeIP}, {Type: corev1.NodeHostName, Address: n.cfg.Name}}
	if logPort != 0 {
		node.Status.DaemonEndpoints.KubeletEndpoint.Port = int32(logPort)
	}
	node.Status.NodeInfo = corev1.NodeSystemInfo{OperatingSystem: "linux", Architecture: "amd64", KubeletVersion: "v1.37.2-devcluster", ContainerRuntimeVersion: "process://devcluster"}
	node.Status.Conditions = []corev1.NodeCondition{{
		Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
		Message: "devcluster process node is posting ready status", LastHeartbeatTime: now, LastTransitionTime: now,
	}}
	if _, err := n.client.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("node status: %w", err)
	}
	return nil
}

// heartbeat keeps the Ready condition fresh.
func (n *Node) heartbeat(ctx context.Context) {
	for sleepCtx(ctx, 40*time.Second) {
		node, err := n.client.CoreV1().Nodes().Get(ctx, n.cfg.Name, metav1.GetOptions{})
		if err != nil {
			continue
		}
		if err := n.updateNodeStatus(ctx, int(node.Status.DaemonEndpoints.KubeletEndpoint.Port)); err != nil && ctx.Err() == nil {
			n.log.Warn("node heartbeat", "err", err)
		}
	}
}
