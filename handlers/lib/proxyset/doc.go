// Package proxyset renders the Kubernetes objects of one dedicated proxy (a
// "singleton" proxy in the official operator's terms) for a parent Service or
// Ingress: the StatefulSet running tailplane-proxy, its config and state
// Secrets, and a ServiceAccount with a Role that can touch only those two
// Secrets. It also reads back what the proxy wrote into its state Secret
// (device_id, device_fqdn, device_ips) and parses the annotations shared by
// Services and Ingresses (tags, proxy class).
//
// Everything here is pure: objects in, objects out, no cluster.
//
// It imports Kubernetes API types, proxy/config, internal/proxystate (the
// labels and state Secret keys shared with the proxy), handlers/lib/settings
// (the operator's ACME settings) and tailscale.com/util/dnsname.
package proxyset
