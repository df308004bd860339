// Package l7 is the proxy's HTTP layer: it turns one request into a
// route.Request, runs the chain of routers (the routing table first, then
// any extra routers such as the WASM plugin host), applies the decision
// (forward, redirect, deny, header edits, Funnel narrowing) and reverse
// proxies to the chosen backend with the caller's tailnet identity.
//
// It imports proxy/route, proxy/routetable, proxy/metrics, the Prometheus
// client, charmbracelet/log and the standard library; the tailnet is reached
// only through the WhoIsFunc it is given.
package l7

import (
	"context"
	"fmt"

	"github.com/tailplane/tailplane/proxy/route"
)

// Chain runs routers in order; each sees the previous one's decision and
// may refine it. It is itself a route.Router.
type Chain []route.Router

// Route runs every router in turn and returns the last decision. The first
// error stops the chain.
func (c Chain) Route(ctx context.Context, req *route.Request, prev route.Decision) (route.Decision, error) {
	d := prev
	for i, r := range c {
		next, err := r.Route(ctx, req, d)
		if err != nil {
			return d, fmt.Errorf("router %d of %d: %w", i+1, len(c), err)
		}
		// A router can only narrow Funnel exposure, never widen it.
		next.DenyPublic = next.DenyPublic || d.DenyPublic
		d = next
	}
	return d, nil
}
