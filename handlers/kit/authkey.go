package kit

import (
	"context"
	"fmt"

	"github.com/tailplane/tailplane/handlers/proxyset"
	"github.com/tailplane/tailplane/internal/tailnet"
)

// AuthKey returns the auth key the proxy's config must carry: none once the
// proxy has a device, the unused key already in its config, or a fresh one
// minted through the tailnet API with tags (preauthorized, non-reusable,
// non-ephemeral, as the official operator mints them).
//
// A fresh key is described with the proxy's name (proxyset.KeyDescription).
// Before minting, the keys minted for the proxy earlier that still work are
// revoked: with no key in the config and no device, nothing can use them
// (the operator died, or writing the config failed, right after minting),
// and they would otherwise stay valid until they expire. The same is done
// once the device logged in (its key, now spent, leaves the config), and
// DeleteProxy does it too.
func (d *Deps) AuthKey(ctx context.Context, ps *ProxyState, tags []string) (string, error) {
	key, mint := proxyset.AuthKeyFor(ps.Config, ps.State)
	if !mint {
		if inConfig, _ := proxyset.AuthKeyFor(ps.Config, nil); key == "" && inConfig != "" {
			// The device just logged in and its key leaves the config:
			// no other key minted for this proxy is needed any more.
			if err := d.revokeUnusedKeys(ctx, ps.Names); err != nil {
				return "", err
			}
		}
		return key, nil
	}
	if err := d.revokeUnusedKeys(ctx, ps.Names); err != nil {
		return "", err
	}
	k, err := d.Backend.MintAuthKey(ctx, tailnet.KeyRequest{Tags: tags, Preauthorized: true, Description: proxyset.KeyDescription(ps.Names.Base)})
	if err != nil {
		return "", fmt.Errorf("tailnet API: %w", err)
	}
	d.Log.Info("minted an auth key for a proxy", "proxy", ps.Names.Base, "key_id", k.ID)
	return k.Key, nil
}

// revokeUnusedKeys revokes every auth key minted for the proxy named by
// names that can still create a device. Keys a device used are invalid
// already and left alone.
func (d *Deps) revokeUnusedKeys(ctx context.Context, names proxyset.Names) error {
	desc := proxyset.KeyDescription(names.Base)
	keys, err := d.Backend.ListAuthKeys(ctx)
	if err != nil {
		return fmt.Errorf("tailnet API: %w", err)
	}
	for _, k := range keys {
		if k.Description != desc || k.Invalid {
			continue
		}
		if err := d.Backend.RevokeAuthKey(ctx, k.ID); err != nil {
			return fmt.Errorf("tailnet API: %w", err)
		}
		d.Log.Info("revoked an unused auth key of a proxy", "proxy", names.Base, "key_id", k.ID)
	}
	return nil
}
