package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"tailscale.com/ipn"
	"tailscale.com/ipn/store"

	"github.com/tailplane/tailplane/internal/kubestate"
	"github.com/tailplane/tailplane/internal/tslog"
)

// Where the operator's device keeps its state and its scratch files.

func (d *device) stateName() string {
	if d.cfg.Secret == "" {
		return "a file (OPERATOR_SECRET is empty: a new device on every restart)"
	}
	return "Secret " + d.cfg.Namespace + "/" + d.cfg.Secret
}

// stateStore is the Secret store, or without OPERATOR_SECRET a file in the
// scratch folder (the official operator then keeps tsnet's default file
// store, which a container loses on restart too).
func (d *device) stateStore(ctx context.Context, dir string) (ipn.StateStore, error) {
	if d.cfg.Secret == "" {
		st, err := store.NewFileStore(tslog.NewTsnet(d.cfg.Log, d.cfg.TsnetDebug).Logf, filepath.Join(dir, "tailscaled.state"))
		if err != nil {
			return nil, fmt.Errorf("device state file: %w", err)
		}
		return st, nil
	}
	st, err := kubestate.New(ctx, d.cfg.Kube, d.cfg.Namespace, d.cfg.Secret)
	if err != nil {
		return nil, fmt.Errorf("device state (OPERATOR_SECRET): %w", err)
	}
	return st, nil
}

// existingNode reports whether st holds a node that logged in before, and
// the tags it advertises (kept, so that a changed OPERATOR_INITIAL_TAGS
// never asks control to retag an existing device).
func existingNode(st ipn.StateStore) (bool, []string, error) {
	p, err := storedPrefs(st)
	if err != nil || p == nil || p.Persist == nil || p.Persist.NodeID == "" {
		return false, nil, err
	}
	return true, p.AdvertiseTags, nil
}

// storedNodeID is the stable node ID of the node st holds, "" when none.
func storedNodeID(st ipn.StateStore) (string, error) {
	p, err := storedPrefs(st)
	if err != nil || p == nil || p.Persist == nil {
		return "", err
	}
	return string(p.Persist.NodeID), nil
}

// storedPrefs are the prefs of st's current profile, nil when it has none.
func storedPrefs(st ipn.StateStore) (*ipn.Prefs, error) {
	cur, err := st.ReadState(ipn.CurrentProfileStateKey)
	if errors.Is(err, ipn.ErrStateNotExist) || len(cur) == 0 {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	b, err := st.ReadState(ipn.StateKey(cur))
	if errors.Is(err, ipn.ErrStateNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var p ipn.Prefs
	if err := ipn.PrefsFromBytes(b, &p); err != nil {
		return nil, fmt.Errorf("profile %s: %w", cur, err)
	}
	return &p, nil
}

// scratchDir makes the folder tsnet needs (its log and certificate files;
// the state is elsewhere when OPERATOR_SECRET is set): under base (TMPDIR,
// else /tmp), else under /dev/shm, so that a read-only root file system
// without a /tmp volume still works. One folder per process, so that
// operators sharing a host (devcluster, tests) never share one.
func scratchDir(base string) (string, error) {
	if base == "" {
		base = "/tmp"
	}
	dir, err := os.MkdirTemp(base, "tailplane-operator-")
	if err == nil {
		return dir, nil
	}
	if dir, err2 := os.MkdirTemp(sharedMemoryDir, "tailplane-operator-"); err2 == nil {
		return dir, nil
	}
	return "", fmt.Errorf("no writable folder for the operator's tailnet device (tried %s and %s; mount an emptyDir at /tmp): %w", base, sharedMemoryDir, err)
}
