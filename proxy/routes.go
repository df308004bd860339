package proxy

import (
	"github.com/tailplane/tailplane/proxy/config"
	"github.com/tailplane/tailplane/proxy/l7"
	"github.com/tailplane/tailplane/proxy/routetable"
)

// buildRoutes makes the L7 routing state: the table first in the chain,
// then Options.ExtraRouters in order.
func (e *Engine) buildRoutes(c *config.L7) *l7.Routes {
	table := routetable.New(c)
	chain := append(l7.Chain{table}, e.opts.ExtraRouters...)
	https := map[string]bool{}
	add := func(b config.Backend) {
		if b.HTTPS {
			https[b.Address] = true
		}
	}
	if c.DefaultBackend != nil {
		add(*c.DefaultBackend)
	}
	for _, r := range c.Rules {
		for _, p := range r.Paths {
			add(p.Backend)
		}
	}
	return &l7.Routes{Table: table, Routers: chain, HTTPSBackends: https}
}
