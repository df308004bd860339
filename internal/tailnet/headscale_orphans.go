package tailnet

import (
	"context"
	"net/http"
	"time"
)

// ExpireOrphanedKeys expires the unused, unexpired, tagged pre-auth keys of
// the operator's user created before createdBefore that inUse does not
// claim: keys an operator minted and died before writing into a proxy's
// config Secret (Headscale keeps no description to find them by). Headscale
// lists keys with their secrets: they go only to inUse, and never into the
// returned keys, errors or logs.
func (h *Headscale) ExpireOrphanedKeys(ctx context.Context, createdBefore time.Time, inUse KeysInUse) ([]AuthKey, error) {
	owner, keys, err := h.listKeys(ctx)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	var candidates []hsPreAuthKey
	for _, k := range keys {
		if k.Used || len(k.ACLTags) == 0 || k.Key == "" || !k.Expiration.After(now) ||
			k.CreatedAt.IsZero() || !k.CreatedAt.Before(createdBefore) {
			continue
		}
		candidates = append(candidates, k)
	}
	if len(candidates) == 0 {
		return nil, nil
	}
	used, err := inUse(ctx)
	if err != nil {
		return nil, err
	}
	var expired []AuthKey
	for _, k := range candidates {
		if used(k.Key) {
			continue
		}
		if err := h.do(ctx, "expire orphaned auth key "+k.ID, http.MethodPost, "/api/v1/preauthkey/expire",
			map[string]string{"user": owner, "key": k.Key}, nil); err != nil {
			return expired, err
		}
		out := h.authKey(k)
		out.Invalid = true
		expired = append(expired, out)
	}
	return expired, nil
}
