// Package handlers holds Tailplane's operator logic as small handler modules,
// one sub-package per concern (service, ingress, ingressclass, egress,
// connector, proxygroup, proxyclass, plugin). Each module exposes
// Register(op, deps): a pure render step (parent object and settings to
// desired children), unit-tested without a cluster, and a thin apply step
// using server-side apply.
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
