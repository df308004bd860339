package pipeline

import (
	"errors"
	"fmt"

	"github.com/tailplane/tailplane/handlers/lib/proxyset"
	"github.com/tailplane/tailplane/handlers/lib/settings"
	"github.com/tailplane/tailplane/proxy/config"
)

// Login is how a proxy's replicas join their tailnet: what the pipeline
// learns from the parent's tailnet, not from the parent.
type Login struct {
	// Tailnet names the Tailnet object whose tailnet the replicas join
	// ("" for the operator's own); the config Secrets carry it in
	// LabelTailnet.
	Tailnet string
	// Server is that tailnet's login server ("" for Tailscale's).
	Server string
	// Keys are the replicas' auth keys in ordinal order: "" for a replica
	// that has a device already, and for one beyond the end of Keys.
	Keys []string
}

// Objects are what the pipeline applies for a parent: the proxy and the
// plan's extra objects.
type Objects struct {
	*proxyset.Objects
	// Extra are Plan.Extra's objects, applied before the StatefulSet.
	Extra []any
}

// Render returns the objects of the proxy plan asks for: one replica per
// hostname, each with the config Plan.Config renders, given its auth key
// and the tailnet's login server here (the one place both are set), plus
// the plan's extra objects. It reads nothing: the pipeline applies what it
// returns (with the ProxyClass's changes), and tests and the RBAC check call
// it to see exactly those objects. A plan with Invalid set renders nothing.
// An error of Plan.Config is returned as it is: it says what is wrong with
// the parent.
func Render(parent proxyset.Parent, s settings.Settings, plan *Plan, login Login) (*Objects, error) {
	if plan.Invalid != "" {
		return nil, errors.New(plan.Invalid)
	}
	configs := make([]*config.Config, len(plan.Hostnames))
	for i := range configs {
		cfg, err := plan.Config(i)
		if err != nil {
			return nil, err
		}
		cfg.LoginServer = login.Server
		if i < len(login.Keys) {
			cfg.AuthKey = login.Keys[i]
		}
		configs[i] = cfg
	}
	objs, err := proxyset.Render(proxyset.Spec{Parent: parent, Namespace: s.Namespace, Image: s.ProxyImage,
		Configs: configs, ExtraSecrets: plan.ExtraSecrets, ACME: s.ProxyACME})
	if err != nil {
		return nil, fmt.Errorf("render proxy for %s/%s: %w", parent.Namespace, parent.Name, err)
	}
	if login.Tailnet != "" {
		for _, r := range objs.Replicas {
			r.ConfigSecret.Labels[LabelTailnet] = login.Tailnet
		}
	}
	out := &Objects{Objects: objs}
	if plan.Extra != nil {
		out.Extra = plan.Extra(objs)
	}
	return out, nil
}
