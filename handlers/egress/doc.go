// Package egress is the handler module for egress Services: Services
// annotated tailscale.com/tailnet-fqdn or tailscale.com/tailnet-ip (or the
// deprecated tailscale.com/ts-tailnet-target-ip) that let cluster workloads
// reach a tailnet device. This file set is the pure part: validation with the
// official messages, the egress proxy's plan (Plan: a proxy plus a headless
// Service selecting its Pod, which pipeline.Render turns into objects), and
// the rewrite of the user's Service to an
// ExternalName pointing at that headless Service, as the official operator
// does.
//
// register.go is the thin apply step (Register): it imports runtime/ and
// handlers/lib/cluster as well; the render files import Kubernetes API types,
// handlers/lib/pipeline (its Plan), handlers/lib/proxyset,
// handlers/lib/settings, internal/proxystate and proxy/config only.
//
// members.go and members_apply.go are the other kind of egress Service: one
// annotated tailscale.com/proxy-group, served by the replicas of an egress
// ProxyGroup instead of a proxy of its own (RegisterMember, a
// pipeline.MemberModule): a cluster Service in the operator namespace whose
// ports the group allocates from the claims this kind hands it through the
// groupmember.Registry, an EndpointSlice of the replicas that serve it, its
// externalName pointed there, and its conditions. They import
// handlers/lib/groupmember, conditions, pipeline and internal/proxystate as
// well.
package egress
