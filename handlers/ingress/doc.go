// Package ingress is the handler module for Ingresses of the tailscale
// IngressClass, each served by a dedicated L7 proxy. This file set is the
// pure render step: which Ingresses are ours, their hostname, http-redirect
// and Funnel, the proxy's plan (Plan, which pipeline.Render turns into the
// proxy's objects, with the routes handlers/lib/ingressroutes renders), and
// the Ingress status read back from the proxy's state.
//
// Problems found while rendering (a backend Service that does not exist, a
// rule for another host) do not stop the proxy: what is valid is served, and
// each problem is returned as an Event to post, with the official reasons.
//
// register.go is the thin apply step (Register): it imports runtime/ and
// handlers/lib/cluster as well; the render files import Kubernetes API types,
// handlers/lib/ingressroutes, handlers/lib/pipeline (its Plan), handlers/lib/proxyset,
// handlers/lib/settings, internal/tailnet (a control server's features) and
// proxy/config only.
//
// members.go and members_apply.go are the other kind of Ingress: one
// annotated tailscale.com/proxy-group, served as a Tailscale Service by the
// replicas of an ingress ProxyGroup instead of a proxy of its own
// (RegisterMember, a groupmember.ServiceKind: its rendering, Events and
// status; the lifecycle is the library's). They import
// handlers/lib/groupmember and pipeline as well.
package ingress
