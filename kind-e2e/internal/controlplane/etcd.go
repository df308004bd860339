package controlplane

import (
	"context"
	"fmt"
	"net/url"
	"path/filepath"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
)

// Etcd is an etcd member running inside this process.
type Etcd struct {
	server *embed.Etcd
	// ClientURL is where kube-apiserver reaches it.
	ClientURL string
}

// StartEtcd starts etcd with its data under dir, listening on two free
// loopback ports. It returns when etcd serves clients.
func StartEtcd(ctx context.Context, dir string, clientPort, peerPort int) (*Etcd, error) {
	cfg := embed.NewConfig()
	cfg.Dir = filepath.Join(dir, "etcd")
	cfg.Logger = "zap"
	cfg.LogLevel = "error"
	cfg.LogOutputs = []string{filepath.Join(dir, "logs", "etcd.log")}
	// A developer cluster values speed over durability of the last write.
	cfg.UnsafeNoFsync = true
	client := url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", clientPort)}
	peer := url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", peerPort)}
	cfg.ListenClientUrls = []url.URL{client}
	cfg.AdvertiseClientUrls = []url.URL{client}
	cfg.ListenPeerUrls = []url.URL{peer}
	cfg.AdvertisePeerUrls = []url.URL{peer}
	cfg.InitialCluster = cfg.Name + "=" + peer.String()

	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, fmt.Errorf("start etcd: %w", err)
	}
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		e.Close()
		return nil, fmt.Errorf("etcd failed while starting: %w", err)
	case <-time.After(60 * time.Second):
		e.Close()
		return nil, fmt.Errorf("etcd not ready after 60s (log: %s)", cfg.LogOutputs[0])
	case <-ctx.Done():
		e.Close()
		return nil, ctx.Err()
	}
	return &Etcd{server: e, ClientURL: client.String()}, nil
}

// Close stops etcd and waits for it to release its files and ports.
func (e *Etcd) Close() { e.server.Close() }
