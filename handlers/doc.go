// Package handlers holds Tailplane's operator logic as small handler modules,
// one sub-package per concern: service, egress and ingress (a proxy per
// parent), ingressclass, proxyclassready (the ProxyClass kind; the pure rules
// are handlers/proxyclass) and plugin (RoutingPlugin). Each module exposes
// Register(op, deps): a pure render step (parent object and settings to
// desired children, with handlers/proxyset for the proxy's objects),
// unit-tested without a cluster, and a thin apply step using server-side
// apply. docs/development.md ("Adding a handler module") lists the steps.
//
// Register (register.go) adds every module to a runtime.Operator; handlers/kit
// holds the apply plumbing the modules share (server-side apply of proxies,
// auth keys, cleanup, conditions, re-handling parents through the runtime's Enqueue).
//
// Handlers may import runtime/, crds/, internal/tailnet, internal/proxystate
// (the state Secret keys and labels shared with the proxy) and proxy/config;
// never the rest of proxy/. Of plugins/, only handlers/plugin imports
// plugins/host (to compile a RoutingPlugin's module, never to run it),
// plugins/sdk/abi and plugins/source (to fetch the module).
package handlers
