// Package proxygroup runs ProxyGroups, and only them: a ProxyGroup is a
// pipeline module (a StatefulSet of replicas, each with its own device) of
// type ingress, egress or kube-apiserver. It knows no kind of member, as
// Caddy's core knows none of its modules: each kind lives in the module of
// its kind and joins the groupmember.Registry that handlers/register.go
// hands to Register, and the group asks the registry for what it needs:
//   - an ingress group's replicas host the Tailscale Service of every member
//     (Registry.Services; of two that want one name, the older keeps it);
//   - an egress group allocates the ports of its members' cluster Services
//     in the official range, one group at a time through the runtime's
//     queue, from the cluster Services themselves (Registry.EgressClaims,
//     allocatePorts in ports.go), and configures its replicas from those
//     cluster Services;
//   - a change of the group's status has every member (Registry.Keys)
//     handled again.
//
// Static endpoints (ProxyClass spec.staticEndpoints) are
// handlers/lib/staticendpoints's. A kube-apiserver group owns its own Tailscale Service
// (apiserver.go, apiserver_apply.go).
//
// proxygroup.go and apiserver.go are pure (rendering, validation and
// status, unit tested); register.go, ports.go, running.go and
// apiserver_apply.go are the thin apply side. It exports only what other
// packages' tests read (conditions, reasons, names). It may import
// handlers/lib/cluster, conditions, groupmember, opmetrics, pipeline, proxyclassrules,
// proxyset, resources, settings, staticendpoints, tsservice, crds/, proxy/config,
// internal/tailnet, internal/proxystate and runtime; never another module
// (`go list -deps ./handlers/proxygroup | grep handlers/` lists only
// handlers/lib).
package proxygroup
