package pipeline

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/tailplane/tailplane/handlers/lib/proxyset"
	"github.com/tailplane/tailplane/internal/tailnet"
)

// authKey returns the auth key a replica's config must carry: none once the
// replica has a device, the unused key already in its config, or a fresh
// one minted through the tailnet API with tags (preauthorized, non-reusable,
// non-ephemeral, as the official operator mints them).
//
// A fresh key is described with the replica's name
// (proxyset.KeyDescription). Before minting, the keys minted for the replica
// earlier that still work are revoked: with no key in the config and no
// device, nothing can use them (the operator died, or writing the config
// failed, right after minting), and they would otherwise stay valid until
// they expire. The same is done once the device logged in (its key, now
// spent, leaves the config), and when the replica or the proxy is deleted.
func (p *Pipeline) authKey(ctx context.Context, be tailnet.Backend, r Replica, tags []string) (string, error) {
	desc := proxyset.KeyDescription(r.Names.Base, r.Names.Ordinal)
	key, mint := proxyset.AuthKeyFor(r.Config, r.State)
	if !mint {
		if inConfig, _ := proxyset.AuthKeyFor(r.Config, nil); key == "" && inConfig != "" {
			// The device just logged in and its key leaves the config:
			// no other key minted for this replica is needed any more.
			if err := p.revokeUnusedKeys(ctx, be, desc); err != nil {
				return "", err
			}
		}
		return key, nil
	}
	if err := p.revokeUnusedKeys(ctx, be, desc); err != nil {
		return "", err
	}
	k, err := be.MintAuthKey(ctx, tailnet.KeyRequest{Tags: tags, Preauthorized: true, Description: desc})
	if err != nil {
		return "", fmt.Errorf("tailnet API: %w", err)
	}
	p.d.Log.Info("minted an auth key for a proxy", "proxy", r.Names.StateSecret, "key_id", k.ID)
	return k.Key, nil
}

// TagsRetry is how often a proxy whose auth key the tailnet refused for
// its tags asks again: the fix is an edit of the tailnet policy file,
// which the operator cannot watch.
const TagsRetry = 5 * time.Minute

// RefusedTags reports whether err is the Tailscale API refusing an auth
// key because the operator's OAuth client may not use tags (HTTP 400,
// "requested tags [...] are invalid or not permitted"), and returns the
// message to show on the parent: the API's words, then what to change.
func RefusedTags(err error, tags []string) (string, bool) {
	var e *tailnet.Error
	if !errors.As(err, &e) || e.Status != http.StatusBadRequest || !strings.Contains(e.Message, "are invalid or not permitted") {
		return "", false
	}
	list := strings.Join(tags, ", ")
	if owner, ok := errors.AsType[*tailnet.TagOwnerError](err); ok {
		return fmt.Sprintf("the tailnet refused an auth key for the proxy's tags %s: %q. Headscale's policy must give the operator "+
			"these tags: in its tagOwners, declare %s with the owner %q (the Headscale user of the operator's pre-auth keys, "+
			"headscale.user), a group listing it, or no owners, or give the proxy tags it owns (the tailscale.com/tags "+
			"annotation, or spec.tags of the ProxyGroup or Connector). Tried again every %s", list, e.Message, list, owner.User+"@", TagsRetry), true
	}
	return fmt.Sprintf("the tailnet refused an auth key for the proxy's tags %s: %q. The operator's OAuth client may only create "+
		"devices with its own tags and the tags they own: in the tailnet policy file, make the client's tag "+
		"(tag:k8s-operator in the official install) an owner of %s in tagOwners, or give the proxy tags the client owns (the tailscale.com/tags "+
		"annotation, or spec.tags of the ProxyGroup or Connector). Tried again every %s", list, e.Message, list, TagsRetry), true
}

// revokeUnusedKeys revokes every auth key described desc that can still
// create a device. Keys a device used are invalid already and left alone.
func (p *Pipeline) revokeUnusedKeys(ctx context.Context, be tailnet.Backend, desc string) error {
	return p.revokeKeys(ctx, be, func(d string) bool { return d == desc })
}

// revokeProxyKeys revokes the unused auth keys of every replica of the
// proxy named base, and of the single-replica proxy of earlier releases.
func (p *Pipeline) revokeProxyKeys(ctx context.Context, be tailnet.Backend, base string) error {
	legacy := proxyset.KeyDescription(base, -1)
	return p.revokeKeys(ctx, be, func(d string) bool { return d == legacy || proxyset.IsReplicaKeyDescription(base, d) })
}

func (p *Pipeline) revokeKeys(ctx context.Context, be tailnet.Backend, match func(description string) bool) error {
	keys, err := be.ListAuthKeys(ctx)
	if err != nil {
		return fmt.Errorf("tailnet API: %w", err)
	}
	for _, k := range keys {
		if k.Invalid || !strings.HasPrefix(k.Description, "tailplane ") || !match(k.Description) {
			continue
		}
		if err := be.RevokeAuthKey(ctx, k.ID); err != nil {
			return fmt.Errorf("tailnet API: %w", err)
		}
		p.d.Log.Info("revoked an unused auth key of a proxy", "description", k.Description, "key_id", k.ID)
	}
	return nil
}
