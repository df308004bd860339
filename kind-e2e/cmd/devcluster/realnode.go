package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/charmbracelet/log"
	"k8s.io/client-go/kubernetes"

	"github.com/tailplane/tailplane/kind-e2e/internal/controlplane"
	"github.com/tailplane/tailplane/kind-e2e/internal/node"
	"github.com/tailplane/tailplane/kind-e2e/internal/realnode"
)

// realNode is `up --node real`: the real node and devcluster's one-node
// scheduler.
type realNode struct {
	n             *realnode.Node
	stopScheduler context.CancelFunc
}

func startRealNode(ctx context.Context, dir, self string, imports []realnode.Import, cp *controlplane.Cluster, client kubernetes.Interface, logger *log.Logger) (*realNode, error) {
	schedCtx, stopScheduler := context.WithCancel(context.Background())
	go node.RunScheduler(schedCtx, client, nodeName, logger.WithPrefix("scheduler"))
	n, err := realnode.Start(ctx, realnode.Config{
		Name: nodeName, Dir: dir, Assets: filepath.Dir(self),
		API:     realnode.APIServer{URL: cp.URL, CA: cp.CA, Token: cp.Token},
		LocalCA: cp.LocalCA, Client: client, Logger: logger.WithPrefix("node"), Imports: imports,
		RecordsFile: filepath.Join(dir, dnsRecordsFile),
	})
	if err != nil {
		stopScheduler()
		return nil, err
	}
	return &realNode{n: n, stopScheduler: stopScheduler}, nil
}

func (r *realNode) Done() <-chan error { return r.n.Done() }

func (r *realNode) Stop() {
	r.stopScheduler()
	r.n.Stop()
}

// startControlPlane starts the control plane as the node kind needs it: for
// the real node, reachable from pods on the node's bridge address and with
// Services in a range kube-proxy can route. On either node, pods trust
// devcluster's local CA through their service-account CA bundle
// (controlplane.PodCAFile): the real node's containers see no host file,
// and on the process node a pod may mount over the host folder holding it
// (the operator chart's emptyDir on /tmp hides a devcluster folder under
// /tmp, as tests make them).
func startControlPlane(ctx context.Context, dir, self, nodeKind, auditPolicy string) (*controlplane.Cluster, error) {
	opts := controlplane.Options{PodTrustsLocalCA: true, AuditPolicy: auditPolicy}
	if nodeKind == "real" {
		if err := realnode.PrepareNetwork(); err != nil {
			return nil, err
		}
		opts.ServiceCIDR, opts.AdvertiseAddress = realnode.ServiceCIDR, realnode.NodeIP
	}
	return controlplane.StartWith(ctx, dir, self, opts)
}

// importFlags are `up --import` values: PATH or REPO=PATH.
type importFlags []realnode.Import

func (f *importFlags) String() string { return fmt.Sprint(*f) }
func (f *importFlags) Set(s string) error {
	repo, path, ok := strings.Cut(s, "=")
	if !ok {
		repo, path = "", s
	}
	if path == "" {
		return fmt.Errorf("--import %q: want PATH or REPO=PATH", s)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return err
	}
	*f = append(*f, realnode.Import{Path: abs, Repo: repo})
	return nil
}

// tailnetHost is where the tailnet (control server, API, DERP, STUN) and the
// ACME server listen: loopback for the process node, whose pods are host
// processes; the bridge address for the real node, the one address of the
// host that pods' network namespaces reach.
func tailnetHost(nodeKind string) string {
	if nodeKind == "real" {
		return realnode.NodeIP
	}
	return "127.0.0.1"
}

// assetsDir is the folder of the devcluster binary, where the real node's
// binaries are built too; "" when unknown.
func assetsDir() string {
	self, err := os.Executable()
	if err != nil {
		return ""
	}
	return filepath.Dir(self)
}
