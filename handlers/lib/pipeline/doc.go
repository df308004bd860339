// Package pipeline is the one way a proxy parent (an exposed Service, an
// egress Service, an Ingress, a Connector) gets its proxy: validate, pick
// the ProxyClass, claim the hostnames, read the replicas, mint their auth
// keys, render, apply, scale down, and report. A module supplies only what is
// particular to its kind of parent, as the hooks of a Module: whether an
// object is its, what proxy it wants (Plan), and how an Outcome shows on
// the parent (Report, Release).
//
// A proxy is a StatefulSet of one or more replicas; each replica has its own
// config Secret, state Secret, auth key and device (proxyset.Names.Replica).
// Scaling down deletes the removed replicas' devices and Secrets; deleting
// the parent, or a parent that stops asking for a proxy, deletes them all.
// Those device parts (keys, devices, reading the replicas, removing them,
// hostname claims) are handlers/lib/device's, for any workload: the
// pipeline renders tailplane-proxy (Settings.ProxyImage, the module's proxy
// config) on top of it, and reads its replicas' state Secrets from its
// index while no auth key is to be decided (device.Devices.Read).
//
// A member of a shared proxy (an Ingress or a Service of a ProxyGroup, a
// Gateway's route next) gets no proxy of its own: its group's module puts
// it into its replicas' configs. A MemberModule supplies its hooks (IsOurs,
// Group, Admit, Serve, Release, Clear) to one lifecycle (member.go): an
// admitted member gets the module's finalizer and is served; a deleted one,
// or one that stops asking, is released, its status cleared, and the
// finalizer removed; a change of a member has its groups (old and new)
// handled again and a change of a group its members, all through the
// runtime's one queue.
//
// A parent the official operator left a proxy for takes its devices over
// (adopt.go, on handlers/lib/adoption's decisions) before its own proxy is
// applied, so that a cluster switched from the official operator keeps its
// devices.
//
// It may import handlers/lib/adoption, handlers/lib/cluster,
// handlers/lib/device, handlers/lib/proxyset, handlers/lib/proxyclassrules,
// handlers/lib/resources, handlers/lib/settings, handlers/lib/tsservice, the
// shared internal packages and runtime; modules import it, never the other
// way round.
package pipeline
