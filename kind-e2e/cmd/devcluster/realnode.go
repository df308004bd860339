package main

import (
	"context"
	"fmt"
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
		API:     realnode.APIServer{URL: fmt.Sprintf("https://127.0.0.1:%d", cp.Ports.APIServer), CA: cp.CA, Token: cp.Token},
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
