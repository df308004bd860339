// Package service is the handler module for Services exposed to the tailnet
// through a dedicated L4 proxy: those annotated tailscale.com/expose: "true",
// and LoadBalancer Services of loadBalancerClass tailscale. This file set is
// the pure render step: which Services are ours, their hostname, tags and
// ProxyClass, the proxy's plan (Plan, which pipeline.Render turns into the
// proxy's objects), and the LoadBalancer status read back from the proxy's
// state.
//
// Services of another loadBalancerClass, or LoadBalancers without a class
// (unless OPERATOR_DEFAULT_LOAD_BALANCER is on), are never touched, so k3s's
// ServiceLB keeps them.
//
// register.go is the thin apply step (Register): it imports runtime/ and
// handlers/lib/cluster as well; the render files import Kubernetes API types,
// handlers/lib/pipeline (its Plan and condition names), handlers/lib/proxyset,
// handlers/lib/settings, internal/proxystate and proxy/config only.
//
// members.go and members_apply.go are the other kind of exposed Service:
// one annotated tailscale.com/proxy-group, served as a Tailscale Service by
// the replicas of an ingress ProxyGroup instead of a proxy of its own
// (RegisterMember, a groupmember.ServiceKind: its rendering, conditions and
// status; the lifecycle is the library's). They import
// handlers/lib/groupmember, conditions and pipeline as well.
package service
