// Package gatewayapi resolves a Gateway API Gateway and the routes that
// name it (HTTPRoute, GRPCRoute, TLSRoute, TCPRoute, UDPRoute) into what
// its proxy serves (proxy/config.Gateway) and the statuses the Gateway API
// asks for. It is pure: it reads the cluster only through the Lookups it
// is given, and writes nothing.
//
//   - listeners.go: which listeners are valid and conflict-free, the route
//     kinds each takes, an HTTPS listener's certificate;
//   - attach.go: which listeners each parentRef of a route attaches to
//     (sectionName, port, allowedRoutes, hostname intersection);
//   - refs.go: backends and certificates, and the ReferenceGrants that
//     permit references across namespaces;
//   - http.go: HTTPRoute and GRPCRoute rules as the proxy's entries, in the
//     spec's precedence order, with their filters;
//   - render.go: Render, which ties them together;
//   - status.go: the Gateway's status and its listeners'.
//
// handlers/gateway applies what it returns, for a Gateway with a device of
// its own and for one served by a ProxyGroup. It imports the Gateway API's
// Go types, apimachinery, proxy/config, handlers/lib/cluster and
// handlers/lib/proxyset; like every library, no module.
package gatewayapi
