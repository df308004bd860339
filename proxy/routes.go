package proxy

import (
	"context"
	"fmt"

	"github.com/tailplane/tailplane/proxy/config"
	"github.com/tailplane/tailplane/proxy/l7"
	"github.com/tailplane/tailplane/proxy/route"
	"github.com/tailplane/tailplane/proxy/routetable"
)

// buildRoutes makes the L7 routing state: the table first in the chain,
// then Options.ExtraRouters, then the routers PluginRouters returns for
// the config's plugins.
func (e *Engine) buildRoutes(ctx context.Context, cfg *config.Config) (*l7.Routes, error) {
	plugins, err := e.pluginRouters(ctx, cfg.Plugins)
	if err != nil {
		return nil, err
	}
	return e.routesFor(cfg.L7, plugins), nil
}

// pluginRouters asks Options.PluginRouters for the routers of plugins.
func (e *Engine) pluginRouters(ctx context.Context, plugins []config.Plugin) ([]route.Router, error) {
	if e.opts.PluginRouters == nil {
		return nil, nil
	}
	rs, err := e.opts.PluginRouters(ctx, plugins)
	if err != nil {
		return nil, fmt.Errorf("plugins: %w", err)
	}
	return rs, nil
}

// routesFor makes the routing state of one L7 section with the given
// plugin routers.
func (e *Engine) routesFor(c *config.L7, plugins []route.Router) *l7.Routes {
	table := routetable.New(c)
	chain := append(l7.Chain{table}, e.opts.ExtraRouters...)
	chain = append(chain, plugins...)
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
	return &l7.Routes{Table: table, Routers: chain, HTTPSBackends: https}
}
