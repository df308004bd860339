// Package proxy is tailplane-proxy's engine: a tsnet node (userspace
// WireGuard; no TUN, no privileges) that serves L7 HTTPS ingress, L4 TCP/UDP
// ingress, egress and connector roles, configured live from a Secret.
//
// It may import tailscale.com, client-go, plugins/ and its own sub-packages;
// never handlers/ or runtime/.
package proxy
