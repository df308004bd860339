// Package handlers holds Tailplane's operator logic. Register (register.go)
// adds every handler module to a runtime.Operator; handlers/README.md is the
// guide to writing one.
//
// The folder shows the design:
//   - handlers/<module>: one registered module per kind of object: service
//     (exposed and LoadBalancer Services), egress (ExternalName Services to
//     the tailnet), ingress (Ingresses), connector (Connector), proxygroup
//     (ProxyGroup, the group only), ingressclass, gatewayclass (the Gateway
//     API's GatewayClasses of tailplane.dev/gateway-controller), gateway
//     (Gateways of those classes and their routes), proxyclass, plugin
//     (RoutingPlugin), proxygrouppolicy (ProxyGroupPolicy as admission
//     policies), dnsconfig (DNSConfig and its nameserver), tailnet (Tailnet:
//     the credentials of other tailnets) and unsupported (the official kinds
//     not served yet). A module is a pure render step, unit-tested without a
//     cluster, and a thin apply step. The members of a ProxyGroup live with
//     the module of their kind (service, egress, ingress: RegisterMember;
//     gateway),
//     and the group asks lib/groupmember's registry for them.
//   - handlers/lib/<library>: what modules share and never register:
//     pipeline (the proxy lifecycle that proxy parents are hooks on, and
//     the member lifecycle of objects served by a shared proxy), device
//     (below the pipeline: the replicas' auth keys, devices, state Secrets,
//     scale-down and hostname claims, for any workload; the operator's own
//     device uses its keys too), tsservice (Tailscale Services that objects
//     own, and their shared certificates), groupmember (what a shared
//     proxy's group and its members share: the registry of member kinds,
//     group reads, the egress cluster Service and its ports), cluster
//     (the dependencies every module gets and the cluster writes they
//     share), proxyset (a proxy's objects and names), proxyclassrules (how a
//     ProxyClass applies to a proxy), gatewayapi (Gateways and routes
//     resolved, purely), settings, resources and conditions.
//     Libraries never import modules.
//   - handlers/bench: the operator benchmarks.
//
// Handlers may import runtime/, crds/, internal/tailnet, internal/proxystate
// (the state Secret keys and labels shared with the proxy) and proxy/config;
// never the rest of proxy/. Of plugins/, only handlers/plugin imports
// plugins/host (to compile a RoutingPlugin's module, never to run it),
// plugins/sdk/abi and plugins/source (to fetch the module).
package handlers
