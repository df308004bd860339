package device

import (
	"context"

	"github.com/charmbracelet/log"

	"github.com/tailplane/tailplane/internal/tailnet"
)

// Keys mints and revokes the auth keys of one kind of device in one
// tailnet. Its errors are the Backend's as they are: they name the tailnet
// API call.
type Keys struct {
	// Backend is the tailnet's API.
	Backend tailnet.Backend
	// Log gets a line for every key revoked.
	Log *log.Logger
	// Of names the devices in those lines: "a proxy", "the operator's
	// device".
	Of string
}

// Mint mints an auth key described desc for a new device with tags:
// preauthorized, single-use and not ephemeral, as the official operator
// mints them. The keys described desc that can still create a device are
// revoked first: nothing recorded them (the caller died, or failed to write
// its config, right after minting), and they would otherwise stay valid
// until they expire.
func (k Keys) Mint(ctx context.Context, desc string, tags []string) (tailnet.AuthKey, error) {
	if err := k.RevokeUnused(ctx, func(d string) bool { return d == desc }); err != nil {
		return tailnet.AuthKey{}, err
	}
	key, err := k.Backend.MintAuthKey(ctx, tailnet.KeyRequest{Tags: tags, Preauthorized: true, Description: desc})
	if err != nil {
		return tailnet.AuthKey{}, err
	}
	return key, nil
}

// RevokeUnused revokes every auth key whose description match accepts and
// that can still create a device. Keys a device used are invalid already
// and left alone.
func (k Keys) RevokeUnused(ctx context.Context, match func(description string) bool) error {
	keys, err := k.Backend.ListAuthKeys(ctx)
	if err != nil {
		return err
	}
	for _, key := range keys {
		if key.Invalid || !match(key.Description) {
			continue
		}
		if err := k.Backend.RevokeAuthKey(ctx, key.ID); err != nil {
			return err
		}
		k.Log.Info("revoked an unused auth key of "+k.Of, "description", key.Description, "key_id", key.ID)
	}
	return nil
}
