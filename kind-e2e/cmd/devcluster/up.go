package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/charmbracelet/log"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/tailplane/tailplane/kind-e2e/internal/clusterdns"
	"github.com/tailplane/tailplane/kind-e2e/internal/controlplane"
	"github.com/tailplane/tailplane/kind-e2e/internal/node"
	"github.com/tailplane/tailplane/kind-e2e/internal/realnode"
	"github.com/tailplane/tailplane/kind-e2e/internal/registry"
	"github.com/tailplane/tailplane/kind-e2e/internal/svcproxy"
)

// NodeName is the name of devcluster's one node.
const nodeName = "devcluster"

type imageFlags []node.ImageRule

func (f *imageFlags) String() string { return fmt.Sprint(*f) }
func (f *imageFlags) Set(s string) error {
	r, err := node.ParseImageRule(s)
	if err != nil {
		return err
	}
	*f = append(*f, r)
	return nil
}

// defaultImages is the image map devcluster ships with: the project's
// operator and proxy images (binaries from binDir) and the echo test image
// (built next to devcluster).
func defaultImages(binDir, self string) node.ImageMap {
	echo := filepath.Join(filepath.Dir(self), "devcluster-echo")
	op := filepath.Join(binDir, "tailplane-operator")
	px := filepath.Join(binDir, "tailplane-proxy")
	return node.ImageMap{
		{Glob: "*tailplane/echo*", Binary: echo},
		{Glob: "*tailplane-echo*", Binary: echo},
		{Glob: "*tailplane/operator*", Binary: op},
		{Glob: "*tailplane-operator*", Binary: op},
		{Glob: "*tailplane/proxy*", Binary: px},
		{Glob: "*tailplane-proxy*", Binary: px},
	}
}

func runUp(args []string) error {
	fs := flag.NewFlagSet("up", flag.ExitOnError)
	dir := fs.String("dir", "", "cluster directory (state, logs, kubeconfig); required")
	bin := fs.String("bin", "bin", "folder with tailplane-operator and tailplane-proxy (go tool task build)")
	var images imageFlags
	fs.Var(&images, "image", "extra image map entry GLOB=BINARY (repeatable; tried before the defaults)")
	nodeKind := fs.String("node", "process", `node kind: "process" (pods as host processes, fast) or "real" (kubelet, containerd, runc, CNI; needs go tool task test:node)`)
	var imports importFlags
	fs.Var(&imports, "import", "with --node real: images to import into containerd at start (repeatable): an image archive, an OCI layout folder, or a folder of layouts such as `go run ./deploy/images build -out DIR` writes, named "+realnode.DefaultImportRepo+"/<folder>:<tag>; REPO=PATH names them REPO/<folder>:<tag>")
	auditPolicy := fs.String("audit-policy", "", "write the apiserver's audit log (JSON lines) to D/logs/audit.log under this audit policy file (audit.k8s.io/v1 Policy); bench:official counts each operator's API requests with it")
	tailnetFrom := fs.String("tailnet-from", "", "join the tailnet of the devcluster running in this folder instead of starting one (a second cluster on one tailnet; --node process only, and none of the tailnet's own options)")
	var tnOpts tailnetOptions
	parsedTailnet := tnOpts.addFlags(fs)
	_ = fs.Parse(args)
	if err := parsedTailnet(); err != nil {
		return fmt.Errorf("up: %w", err)
	}
	if *tailnetFrom != "" {
		if *nodeKind != "process" {
			return errors.New("up: --tailnet-from needs --node process (its pods read the other cluster's ACME CA from the host)")
		}
		var own []string
		fs.Visit(func(f *flag.Flag) {
			if tnOpts.isOwnFlag(f.Name) {
				own = append(own, "--"+f.Name)
			}
		})
		if len(own) > 0 {
			return fmt.Errorf("up: %s: set by the cluster whose tailnet --tailnet-from joins", strings.Join(own, ", "))
		}
	}
	if *dir == "" {
		return errors.New("up: --dir is required")
	}
	if *nodeKind != "process" && *nodeKind != "real" {
		return fmt.Errorf("up: --node %q: want process or real", *nodeKind)
	}
	if len(imports) > 0 && *nodeKind != "real" {
		return errors.New("up: --import needs --node real (the process node runs binaries, mapped with --image)")
	}
	abs, err := filepath.Abs(*dir)
	if err != nil {
		return err
	}
	binDir, err := filepath.Abs(*bin)
	if err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	logger := log.NewWithOptions(os.Stderr, log.Options{ReportTimestamp: true, Prefix: "devcluster"})
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	start := time.Now()

	release, err := claimDir(abs, *dir, "up")
	if err != nil {
		return err
	}
	defer release()

	policy := *auditPolicy
	if policy != "" {
		if policy, err = filepath.Abs(policy); err != nil {
			return err
		}
	}
	cp, err := startControlPlane(ctx, abs, self, *nodeKind, policy)
	if err != nil {
		return err
	}
	defer cp.Stop()
	if err := cp.StartControllerManager(ctx, self); err != nil {
		return err
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", cp.Kubeconfig)
	if err != nil {
		return err
	}
	cfg.QPS, cfg.Burst = 50, 100
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}

	var nodeDone <-chan error
	var waitFor []chan struct{}
	if *nodeKind == "real" {
		rn, err := startRealNode(ctx, abs, self, imports, cp, client, logger)
		if err != nil {
			return err
		}
		defer rn.Stop()
		nodeDone = rn.Done()
	} else {
		done, ready, stop, err := startProcessNode(abs, self, binDir, images, cp, client, logger)
		if err != nil {
			return err
		}
		defer stop()
		nodeDone, waitFor = done, ready
	}

	var tailnetEnv string
	if *tailnetFrom != "" {
		if tailnetEnv, err = borrowTailnet(abs, *tailnetFrom); err != nil {
			return fmt.Errorf("up: %w", err)
		}
	} else {
		tnOpts.federation = clusterFederation(cp)
		tn, err := startTailnet(ctx, abs, tailnetHost(*nodeKind), controlplane.PodCAFile, tnOpts, cp.LocalCA, logger)
		if err != nil {
			return fmt.Errorf("tailnet: %w", err)
		}
		defer tn.close()
		go watchPolicy(ctx, tnOpts, tn.policyTarget(), logger.WithPrefix("tailnet"))
		tailnetEnv = tn.env
	}

	// Plugin authors push modules here (docs/plugins.md); the operator's
	// pod runs on the host, so loopback reaches it.
	reg, err := registry.Start(abs)
	if err != nil {
		return err
	}
	defer func() {
		if err := reg.Close(); err != nil {
			logger.Warn("stop the OCI registry", "err", err)
		}
	}()

	for _, ch := range waitFor {
		select {
		case <-ch:
		case err := <-nodeDone:
			return fmt.Errorf("node: %w", err)
		case <-ctx.Done():
			return nil
		}
	}
	if err := waitDefaultServiceAccount(ctx, client); err != nil {
		return err
	}
	logger.Info("cluster ready", "took", time.Since(start).Round(time.Millisecond))
	fmt.Printf("ready kubeconfig=%s tailnet=%s registry=%s\n", cp.Kubeconfig, tailnetEnv, reg.Addr)
	select {
	case <-ctx.Done():
		logger.Info("stopping")
		return nil
	case err := <-cp.Done():
		return fmt.Errorf("kube-apiserver exited: %v", err)
	case err := <-cp.ControllerManagerDone():
		return fmt.Errorf("kube-controller-manager exited: %v", err)
	case err := <-nodeDone:
		return fmt.Errorf("node: %w", err)
	}
}

// waitDefaultServiceAccount waits for the serviceaccount controller: pods
// cannot be created in a namespace before its default ServiceAccount exists.
func waitDefaultServiceAccount(ctx context.Context, client kubernetes.Interface) error {
	deadline := time.Now().Add(time.Minute)
	for {
		_, err := client.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{})
		if err == nil {
			return nil
		}
		if !apierrors.IsNotFound(err) || time.Now().After(deadline) {
			return fmt.Errorf("default service account: %w", err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// dnsRecordsFile is the cluster folder's hosts-style file of extra names the
// cluster DNS answers (clusterdns on the process node, CoreDNS on the real
// node); it is the user's and optional.
const dnsRecordsFile = "dns-records"

// startProcessNode starts the process node and the userspace service proxy;
// ready holds what to wait for, stop ends both.
func startProcessNode(abs, self, binDir string, images imageFlags, cp *controlplane.Cluster, client kubernetes.Interface, logger *log.Logger) (done <-chan error, ready []chan struct{}, stop func(), err error) {
	podSubnet, err := node.ClaimPodSubnet(abs)
	if err != nil {
		return nil, nil, nil, err
	}
	// The cluster DNS, as CoreDNS on a kind node: pods with dnsPolicy
	// ClusterFirst get it as their nameserver. It listens on the pod
	// subnet's .1, which the IPAM never hands out, so every cluster on the
	// machine has its own.
	dnsCtx, stopDNS := context.WithCancel(context.Background())
	dnsIP := podSubnet.Addr().Next()
	dns, err := clusterdns.Start(dnsCtx, clusterdns.Config{
		Addr: dnsIP.String(), Services: clusterdns.WatchServices(dnsCtx, client),
		RecordsFile: filepath.Join(abs, dnsRecordsFile), Logger: logger.WithPrefix("dns"),
	})
	if err != nil {
		stopDNS()
		return nil, nil, nil, err
	}

	nodeCtx, stopNode := context.WithCancel(context.Background())
	nodeDone := make(chan error, 1)
	nodeReady := make(chan struct{})
	n := node.New(client, node.Config{
		Name: nodeName, Dir: abs, Self: self,
		Images:        append(node.ImageMap(images), defaultImages(binDir, self)...),
		APIServerHost: "127.0.0.1", APIServerPort: strconv.Itoa(cp.Ports.APIServer),
		LocalCA: cp.LocalCA, PodSubnet: podSubnet, ClusterDNS: dnsIP, Logger: logger.WithPrefix("node"),
	})
	go func() { nodeDone <- n.Run(nodeCtx, nodeReady) }()

	proxyCtx, stopProxy := context.WithCancel(context.Background())
	proxyReady := make(chan struct{})
	go svcproxy.New(client, logger.WithPrefix("svcproxy")).Run(proxyCtx, proxyReady)
	stop = func() {
		stopProxy()
		stopNode()
		<-nodeDone
		dns.Close()
		stopDNS()
		if err := node.ReleasePodSubnet(abs); err != nil {
			logger.Warn("remove pod route", "err", err)
		}
	}
	return nodeDone, []chan struct{}{nodeReady, proxyReady}, stop, nil
}

// claimDir makes abs (given as dir on the command line) this process's
// cluster folder: it fails, naming the command, while another devcluster
// runs for it, and writes devcluster.pid, which down reads. release removes
// the pid file.
func claimDir(abs, dir, command string) (release func(), err error) {
	if err := os.MkdirAll(abs, 0o755); err != nil {
		return nil, err
	}
	pidFile := filepath.Join(abs, "devcluster.pid")
	if pid := livePID(abs); pid != 0 {
		return nil, fmt.Errorf("%s: devcluster (pid %d) is already running for %s; run devcluster down --dir %s first", command, pid, abs, dir)
	}
	if err := os.WriteFile(pidFile, []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		return nil, err
	}
	return func() { os.Remove(pidFile) }, nil
}
