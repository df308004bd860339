package groupmember

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/tailplane/tailplane/handlers/lib/tsservice"
	"github.com/tailplane/tailplane/internal/tailnet"
	"github.com/tailplane/tailplane/runtime"
)

// SharedWith names the operators in others (stable node IDs of their
// devices) by their devices' MagicDNS names, with the ID: "op.tail1.ts.net
// (nXYZ)"; an operator whose device is not listed by its ID alone.
func SharedWith(others []string, devices []tailnet.Device) []string {
	names := make(map[string]string, len(devices))
	for _, d := range devices {
		names[d.ID] = d.Name
	}
	out := make([]string, 0, len(others))
	for _, id := range others {
		if name := names[id]; name != "" {
			out = append(out, fmt.Sprintf("%s (%s)", name, id))
		} else {
			out = append(out, id)
		}
	}
	return out
}

// SharedMessage says that the operators shared (SharedWith's names) of
// other clusters serve service too, and what deleting kind here does.
func SharedMessage(service, kind string, shared []string) string {
	clusters := "another cluster"
	if len(shared) > 1 {
		clusters = fmt.Sprintf("%d other clusters", len(shared))
	}
	return fmt.Sprintf("Tailscale Service %s is also served by the operator of %s: %s; deleting this %s or its ProxyGroup withdraws only this cluster's proxies, and the service stays up on the others",
		service, clusters, strings.Join(shared, ", "), kind)
}

// ownersSeen remembers, per tailnet and Tailscale Service, the other
// operators last seen owning a service that a member of one kind serves.
type ownersSeen struct {
	mu   sync.Mutex
	seen map[string]string // "<tailnet>/<service>" -> others, comma-joined
}

// checkOwners re-handles this kind's members whose Tailscale Service
// gained or lost an operator of another cluster since the last look: that
// happens in the other cluster, which no watch here sees. The first look
// only records (every member is handled when the operator starts).
func (k *serviceKind) checkOwners(ctx context.Context) error {
	k.owners.mu.Lock()
	defer k.owners.mu.Unlock()
	first := k.owners.seen == nil
	next := map[string]string{}
	for _, name := range append([]string{""}, k.d.Tailnets.Ready()...) {
		be, err := k.d.Tailnets.For(name)
		if err != nil {
			continue // gone or not ready since Ready
		}
		list, err := be.ListServices(ctx)
		if err != nil {
			return fmt.Errorf("list the Tailscale Services of tailnet %q: %w", name, err)
		}
		for i := range list {
			o, others, ok := tsservice.SharedMember(&list[i], k.d.OperatorNodeID)
			if !ok || o.Kind != k.Kind {
				continue
			}
			id, sig := name+"/"+list[i].Name, strings.Join(others, ",")
			next[id] = sig
			if old, known := k.owners.seen[id]; !first && (!known || old != sig) {
				k.d.Log.Info("another cluster's operator began or stopped serving a member's Tailscale Service", "service", list[i].Name,
					"kind", k.Kind, "member", o.Namespace+"/"+o.Name, "others", sig)
				k.d.Op.Enqueue(k.Resource, runtime.ObjectKey(o.Namespace, o.Name), 0)
			}
		}
	}
	k.owners.seen = next
	return nil
}
