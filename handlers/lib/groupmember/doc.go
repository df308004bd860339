// Package groupmember is what a shared proxy's group (a ProxyGroup) and the
// kinds of its members share, so that the group's module knows no member
// kind, as Caddy's core knows none of its modules:
//   - registry.go: the Registry that member kinds join at wiring time
//     (handlers/register.go), through which the group asks for its members'
//     pieces: the Tailscale Services its replicas host (ServiceSource), the
//     egress targets whose ports it allocates (EgressSource), and the keys
//     of every member it has handled again when its status changes;
//   - group.go: reading a group as its members see it (the ProxyGroup, its
//     replicas, their Pods, availability, tailnet) and the annotation that
//     names it;
//   - service.go: the one lifecycle of members hosted as a Tailscale
//     Service (an Ingress or a Service of an ingress group), which the
//     ingress and service modules fill in with their kind's rendering and
//     status (ServiceKind);
//   - egress.go: the cluster Service of an egress member, its name and the
//     allocation of its ports in the group's range, which the group's
//     handler makes and the egress module's member hooks read.
//
// Each member kind lives in the module of its kind (handlers/ingress,
// handlers/service, handlers/egress) and registers a
// pipeline.MemberModule for its lifecycle and itself here for what its
// group needs. It may import handlers/lib/cluster, pipeline, tsservice,
// proxyset, resources, crds/, internal/tailnet, proxy/config and runtime;
// like every library, no module.
package groupmember
