// Package gateway is the handler module of the Gateway API's Gateway and
// its routes (HTTPRoute, GRPCRoute, TLSRoute, TCPRoute, UDPRoute): a
// Gateway of a GatewayClass of ours (handlers/gatewayclass) is a proxy
// parent on the shared pipeline, whose one device serves the Gateway's
// listeners with the routes attached to them (proxy role "gateway",
// proxy/config.Gateway).
//
// The pure part resolves a Gateway and the routes that name it into the
// proxy's config and the statuses the Gateway API asks for: which
// listeners are valid and conflict-free (listeners.go), which route
// parentRefs attach to which listeners (attach.go), which backends and
// certificates resolve and which cross-namespace references a
// ReferenceGrant permits (refs.go), how HTTPRoute and GRPCRoute rules
// become the proxy's entries in the spec's precedence order (http.go), and
// the conditions (status.go). Render ties them together; it reads nothing.
//
// The apply part (register.go, apply.go) is thin: the pipeline hooks of a
// Gateway, indexes that find a Gateway's routes without reading the API
// server, watches that handle a Gateway again when a route, a backend
// Service, a certificate Secret or a ReferenceGrant changes (all through
// the runtime's one queue), and the routes' status.parents entries of this
// controller.
//
// It imports the Gateway API's Go types (sigs.k8s.io/gateway-api/apis),
// proxy/config, handlers/gatewayclass, handlers/plugin, handlers/lib and
// runtime; nothing imports it but handlers.
package gateway
