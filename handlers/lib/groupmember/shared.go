package groupmember

import (
	"fmt"
	"strings"

	"github.com/tailplane/tailplane/internal/tailnet"
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
