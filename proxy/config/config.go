package config

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// Version is the only schema version this package reads and writes.
const Version = "v1alpha1"

// SecretKey is the key of the config Secret (and the name of the file in
// local runs) that holds the JSON document.
const SecretKey = "proxy-config.json"

// Role says what a proxy does with its tailnet node.
type Role string

// The roles a proxy can have.
const (
	// RoleIngressL7 serves HTTPS (and optionally HTTP and Funnel) on the
	// tailnet and routes requests by host and path to cluster backends.
	RoleIngressL7 Role = "ingress-l7"
	// RoleIngressL4 forwards TCP and UDP ports of the tailnet node to a
	// Service's ClusterIP.
	RoleIngressL4 Role = "ingress-l4"
	// RoleEgress listens inside the cluster and dials a tailnet target.
	RoleEgress Role = "egress"
	// RoleConnector routes tailnet traffic into the networks the node
	// reaches: subnet router, exit node or app connector.
	RoleConnector Role = "connector"
	// RoleIngressGroup is a replica of an ingress ProxyGroup: it hosts
	// Tailscale Services (Group), each served with L7 routes or L4 ports.
	RoleIngressGroup Role = "ingress-group"
	// RoleGateway serves a Gateway API Gateway's listeners (Gateway).
	RoleGateway Role = "gateway"
)

// Config is one proxy's whole configuration. Exactly the section matching
// Role (L7, L4, Egress, Connector, Group or APIServer) is used; the others
// must be empty.
type Config struct {
	// Version must be Version ("v1alpha1").
	Version string `json:"version"`
	// Hostname is the tailnet device name (one DNS label).
	Hostname string `json:"hostname"`
	// Tags are ACL tags the node asks for, each "tag:<name>".
	Tags []string `json:"tags,omitempty"`
	// LoginServer is the control server URL; empty means Tailscale's.
	LoginServer string `json:"loginServer,omitempty"`
	// AuthKey is used for the first login only; a node with saved state
	// ignores it.
	AuthKey string `json:"authKey,omitempty"`
	// Role selects the section below that is served.
	Role Role `json:"role"`
	// ListenPort, when not 0, is the UDP port the node's WireGuard and
	// peer-to-peer traffic uses (a NodePort Service's target for static
	// endpoints); 0 picks any. Read when the node starts.
	ListenPort int `json:"listenPort,omitempty"`
	// StaticEndpoints are addresses ("ip:port") where peers can reach the
	// node directly besides those it finds itself, such as a node's
	// external IP and a NodePort forwarded to ListenPort (ProxyClass
	// spec.staticEndpoints). Applied live.
	StaticEndpoints []string `json:"staticEndpoints,omitempty"`
	// AllowedSourceRanges, when set, limits which tailnet source addresses
	// (CIDRs) may connect to the node's listeners. Empty allows all.
	AllowedSourceRanges []string `json:"allowedSourceRanges,omitempty"`

	L7     *L7     `json:"l7,omitempty"`
	L4     *L4     `json:"l4,omitempty"`
	Egress *Egress `json:"egress,omitempty"`
	// Connector is the connector section (RoleConnector).
	Connector *Connector `json:"connector,omitempty"`
	// Group is the ingress ProxyGroup section (RoleIngressGroup).
	Group *Group `json:"group,omitempty"`
	// APIServer is the kube-apiserver ProxyGroup section
	// (RoleKubeAPIServer).
	APIServer *APIServer `json:"apiServer,omitempty"`
	// Gateway is the Gateway API section (RoleGateway).
	Gateway *Gateway `json:"gateway,omitempty"`

	// Plugins are the RoutingPlugins that target this proxy, in the order
	// the proxy runs them after its routing table (L7 only).
	Plugins []Plugin `json:"plugins,omitempty"`
}

// Plugin is one routing plugin, as handlers/plugin.ProxyPlugin writes it and
// tailplane-proxy (cmd/tailplane-proxy, through proxy.Options.PluginRouters)
// loads it.
type Plugin struct {
	// Name is the RoutingPlugin's "<namespace>/<name>"; the proxy reports
	// the plugin under it (internal/proxystate.KeyPluginStatus).
	Name string `json:"name"`
	// Spec is the RoutingPlugin's spec with its module pointing at the
	// operator's copy in the proxy's namespace (handlers/plugin.ProxySpec);
	// opaque to this package.
	Spec json.RawMessage `json:"spec,omitempty"`
}

// Parse decodes a config document strictly (unknown fields are errors) and
// validates it. The error names the offending field.
func Parse(data []byte) (*Config, error) {
	var probe struct {
		Version string `json:"version"`
	}
	if err := json.Unmarshal(data, &probe); err != nil {
		return nil, fmt.Errorf("config is not valid JSON: %w", err)
	}
	if probe.Version != Version {
		return nil, fmt.Errorf("version: unknown config version %q (this proxy reads %q)", probe.Version, Version)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var c Config
	if err := dec.Decode(&c); err != nil {
		return nil, fmt.Errorf("config does not match schema %s: %w", Version, err)
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return &c, nil
}
