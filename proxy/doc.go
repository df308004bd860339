// Package proxy is tailplane-proxy's engine: a tsnet node (userspace
// WireGuard; no TUN, no privileges) that serves the L7 HTTPS ingress, L4
// TCP/UDP ingress, egress and connector (subnet router, exit node, app
// connector) roles, and the ingress-group role of a ProxyGroup replica,
// which hosts Tailscale Services (group.go: served straight from the node's
// netstack on the services' addresses, advertised only while servable, with
// certificates shared through Secrets; a service's L7, L4 or Gateway
// section, the last served as the gateway role serves its own:
// groupgateway.go), and the kube-apiserver role of a
// ProxyGroup replica, which hosts one such service and serves it with the
// Kubernetes API server proxy (apiserverrole.go, proxy/apiserver), and the
// gateway role of a Gateway API Gateway (gateway.go, gatewaytls.go: HTTP,
// HTTPS, TLS passthrough, TCP and UDP listeners by port, routed by
// proxy/gatewaytable), configured live from a Secret or a file
// (proxy/config), with its state in a Secret (internal/kubestate).
//
// Engine.Run applies each config document atomically: listeners that stay
// are kept, routes and targets swap, and anything that fails leaves the
// previous config serving. L7 requests go through a chain of route.Router:
// the routing table (proxy/routetable; proxy/gatewaytable, one per port,
// for the gateway role) first, then Options.ExtraRouters, then the routers
// Options.PluginRouters returns for the config's plugins (and, for the
// gateway role and a group's Gateway services, the plugins of the rule the
// request matched).
//
// It may import tailscale.com, client-go, plugins/ and its own sub-packages;
// never handlers/ or runtime/.
package proxy
