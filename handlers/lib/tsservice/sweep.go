package tsservice

import (
	"context"
	"fmt"

	"github.com/tailplane/tailplane/internal/tailnet"
)

// Sweep withdraws o from the Tailscale Services it owns in be's tailnet
// besides keep (the service it has now; "" for none): it deletes a service
// only o owned, and takes this operator's reference off one that other
// operators (other clusters) own too, which they go on serving.
func Sweep(ctx context.Context, be tailnet.Backend, operatorID string, o Owner, keep string) error {
	list, err := be.ListServices(ctx)
	if err != nil {
		return err
	}
	for i := range list {
		s := &list[i]
		if s.Name == keep || !o.Owns(s, operatorID) {
			continue
		}
		own, err := readOwners(s, operatorID)
		if err != nil {
			return err
		}
		rest := own.without(operatorID)
		if len(rest.refs) == 0 {
			if err := be.DeleteService(ctx, s.Name); err != nil {
				return err
			}
			continue
		}
		if err := rest.write(s.Annotations); err != nil {
			return fmt.Errorf("owner annotations of Tailscale Service %s: %w", s.Name, err)
		}
		if err := be.PutService(ctx, *s); err != nil {
			return err
		}
	}
	return nil
}
