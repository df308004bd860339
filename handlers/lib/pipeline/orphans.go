package pipeline

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tailplane/tailplane/internal/proxystate"
	"github.com/tailplane/tailplane/internal/tailnet"
)

// JobOrphanedKeys is the runtime job that expires orphaned auth keys.
const JobOrphanedKeys = "orphaned-auth-keys"

// registerOrphanSweep has the runtime search the operator's tailnet for
// orphaned auth keys at every start of leadership and every
// Deps.OrphanKeySweep, when its keys carry no description to find them by
// (Headscale). On the Tailscale API the description does it:
// device.Devices.AuthKey revokes a replica's leftover keys before minting,
// and its Remove and RemoveReplica revoke them with the replica.
func (p *Pipeline) registerOrphanSweep() {
	if _, ok := p.d.Backend.(tailnet.KeySweeper); !ok {
		return
	}
	_ = p.d.Op.Every(JobOrphanedKeys, p.d.OrphanKeySweep, p.sweepOrphanedKeys) // collected by Run
}

// sweepOrphanedKeys expires the keys an operator minted and never wrote
// into a proxy's config Secret (it stopped between the two steps): unused,
// unexpired, tagged, older than Deps.OrphanKeyGrace, and in none of the
// operator's Secrets. Each one is logged as a warning, since it means an
// operator stopped half-way.
func (p *Pipeline) sweepOrphanedKeys(ctx context.Context) error {
	sweeper := p.d.Backend.(tailnet.KeySweeper)
	expired, err := sweeper.ExpireOrphanedKeys(ctx, time.Now().Add(-p.d.OrphanKeyGrace), p.keysInSecrets)
	for _, k := range expired {
		p.d.Log.Warn("expired an orphaned auth key: unused, and no proxy's Secret holds it (an operator stopped between minting it and recording it)",
			"key_id", k.ID, "tags", strings.Join(k.Tags, ","), "created", k.Created.UTC().Format(time.RFC3339))
	}
	if err != nil {
		return fmt.Errorf("tailnet API: expire orphaned auth keys: %w", err)
	}
	return nil
}

// keysInSecrets reads the Secrets the operator manages in its namespace
// (every replica's config and state, and the config of earlier releases)
// and returns a test of whether a key's secret appears in any of them.
// Matching anywhere in the data rather than in one field errs on the side
// of keeping a key.
func (p *Pipeline) keysInSecrets(ctx context.Context) (func(secret string) bool, error) {
	ns := p.d.Settings.Namespace
	list, err := p.d.Kube.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{LabelSelector: proxystate.LabelManaged + "=true"})
	if err != nil {
		return nil, fmt.Errorf("list the proxies' Secrets in %s: %w", ns, err)
	}
	return func(secret string) bool {
		for _, s := range list.Items {
			for _, v := range s.Data {
				if bytes.Contains(v, []byte(secret)) {
					return true
				}
			}
		}
		return false
	}, nil
}
