package proxy

import (
	"context"
	"fmt"

	"github.com/tailplane/tailplane/proxy/config"
	"github.com/tailplane/tailplane/proxy/l7"
	"github.com/tailplane/tailplane/proxy/routetable"
)

// buildRoutes makes the L7 routing state: the table first in the chain,
// then Options.ExtraRouters, then the routers PluginRouters returns for
// the config's plugins.
func (e *Engine) buildRoutes(ctx context.Context, cfg *config.Config) (*l7.Routes, error) {
	c := cfg.L7
	table := routetable.New(c)
	chain := append(l7.Chain{table}, e.opts.ExtraRouters...)
	if e.opts.PluginRouters != nil {
		plugins, err := e.opts.PluginRouters(ctx, cfg.Plugins)
		if err != nil {
			return nil, fmt.Errorf("plugins: %w", err)
		}
		chain = append(chain, plugins...)
	}
	https := map[string]bool{}
	add := func(b config.Backend) {
		if b.HTTPS {
			https[b.Address] = true
		}
	}
	if c.DefaultBackend != nil {
		add(*c.DefaultBackend)
	}
	for _, b := range c.ExtraBackends {
		add(b)
	}
	for _, r := range c.Rules {
		for _, p := range r.Paths {
			add(p.Backend)
		}
	}
	return &l7.Routes{Table: table, Routers: chain, HTTPSBackends: https}, nil
}
