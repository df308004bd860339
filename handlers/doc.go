// Package handlers holds Tailplane's operator logic as small handler modules,
// one sub-package per concern: service, egress, ingress and connector (proxy
// parents, as hooks on handlers/pipeline), ingressclass, proxyclassready (the
// ProxyClass kind; the pure rules are handlers/proxyclass), plugin
// (RoutingPlugin), proxygrouppolicy (ProxyGroupPolicy as admission policies),
// tailnet (Tailnet: the credentials of other tailnets, which ProxyGroups and
// Connectors join through spec.tailnet) and unsupported (the official kinds
// not run yet). Each module exposes Register: a pure render step (parent
// object and settings to desired children or proxy configs), unit-tested
// without a cluster, and a thin apply step. docs/development.md ("Adding a
// handler module") lists the steps.
//
// Register (register.go) adds every module to a runtime.Operator. Shared by
// the modules: handlers/pipeline (the proxy lifecycle: N replicas, keys,
// hostnames, apply, scale-down, cleanup), handlers/kit (dependencies and
// cluster writes), handlers/proxyset (a proxy's objects and names),
// handlers/resources and handlers/conditions.
//
// Handlers may import runtime/, crds/, internal/tailnet, internal/proxystate
// (the state Secret keys and labels shared with the proxy) and proxy/config;
// never the rest of proxy/. Of plugins/, only handlers/plugin imports
// plugins/host (to compile a RoutingPlugin's module, never to run it),
// plugins/sdk/abi and plugins/source (to fetch the module).
package handlers
