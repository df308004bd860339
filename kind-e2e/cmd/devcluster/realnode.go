package main

import (
	"context"
	"os"
	"path/filepath"

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

func startRealNode(ctx context.Context, dir, self string, cp *controlplane.Cluster, client kubernetes.Interface, logger *log.Logger) (*realNode, error) {
	schedCtx, stopScheduler := context.WithCancel(context.Background())
	go node.RunScheduler(schedCtx, client, nodeName, logger.WithPrefix("scheduler"))
	n, err := realnode.Start(ctx, realnode.Config{
		Name: nodeName, Dir: dir, Assets: filepath.Dir(self),
		API:     realnode.APIServer{URL: cp.URL, CA: cp.CA, Token: cp.Token},
		LocalCA: cp.LocalCA, Client: client, Logger: logger.WithPrefix("node"),
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
// Services in a range kube-proxy can route.
func startControlPlane(ctx context.Context, dir, self, nodeKind string) (*controlplane.Cluster, error) {
	if nodeKind != "real" {
		return controlplane.Start(ctx, dir, self)
	}
	if err := realnode.PrepareNetwork(); err != nil {
		return nil, err
	}
	return controlplane.StartWith(ctx, dir, self, controlplane.Options{ServiceCIDR: realnode.ServiceCIDR, AdvertiseAddress: realnode.NodeIP})
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
