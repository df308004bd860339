// Package gateway is the handler module of the Gateway API's Gateway: a
// Gateway of a GatewayClass of ours (handlers/gatewayclass) is a proxy
// parent on the shared pipeline, whose one device serves the Gateway's
// listeners with the routes attached to them (proxy role "gateway"), or,
// when it names a ProxyGroup, a member of that group served as a Tailscale
// Service (members.go, on handlers/lib/groupmember).
//
// handlers/lib/gatewayapi resolves a Gateway and its routes, purely; this
// package is the thin apply step: the pipeline and member hooks, indexes
// that find a Gateway's routes without reading the API server, watches
// that handle a Gateway (and its ProxyGroup) again when a route, a backend
// Service, a namespace's labels, a ReferenceGrant or a class changes (all
// through the runtime's one queue), the copies of listeners' certificates,
// and the statuses: the Gateway's, and the routes' status.parents entries
// of this controller.
//
// It imports handlers/lib (gatewayapi, cluster, pipeline, groupmember,
// proxyset, resources, tsservice), handlers/gatewayclass, handlers/plugin,
// internal/tailnet, proxy/config and runtime; nothing imports it but
// handlers.
package gateway
