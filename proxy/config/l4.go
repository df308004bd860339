package config

// Protocol is a transport protocol of a forwarded port.
type Protocol string

// The protocols a port can forward.
const (
	TCP Protocol = "TCP"
	UDP Protocol = "UDP"
)

// L4 is the ingress-l4 section: ports of the tailnet node forwarded to a
// Service's ClusterIP.
type L4 struct {
	// Ports are the forwarded ports; (protocol, port) pairs must be unique.
	Ports []PortMap `json:"ports"`
	// UDPIdleTimeoutSeconds ends a UDP flow after this long without
	// packets in either direction. Default 60.
	UDPIdleTimeoutSeconds int `json:"udpIdleTimeoutSeconds,omitempty"`
}

// PortMap forwards one port.
type PortMap struct {
	// Protocol is TCP (default when empty) or UDP.
	Protocol Protocol `json:"protocol,omitempty"`
	// Port is the port the proxy listens on.
	Port int `json:"port"`
	// Target is where connections go: ClusterIP:port for ingress, or just
	// the port number for egress (where the host is the egress target).
	Target string `json:"target,omitempty"`
	// TargetPort is the port dialled on an egress target; default Port.
	TargetPort int `json:"targetPort,omitempty"`
}

// EffectiveProtocol returns Protocol, defaulting to TCP.
func (p PortMap) EffectiveProtocol() Protocol {
	if p.Protocol == "" {
		return TCP
	}
	return p.Protocol
}

// Egress is the egress section: cluster-side listeners that dial tailnet
// targets through the node.
type Egress struct {
	// Targets are the tailnet destinations; each listens on its own ports.
	// None is valid (an egress ProxyGroup no Service uses yet).
	Targets []EgressTarget `json:"targets"`
	// UDPIdleTimeoutSeconds is as in L4.
	UDPIdleTimeoutSeconds int `json:"udpIdleTimeoutSeconds,omitempty"`
}

// EgressTarget is one tailnet destination. Exactly one of FQDN and IP is set.
type EgressTarget struct {
	// FQDN is a tailnet MagicDNS name, e.g. "db.tail1234.ts.net".
	FQDN string `json:"fqdn,omitempty"`
	// IP is a tailnet IP address.
	IP string `json:"ip,omitempty"`
	// Ports: Port is the cluster-side listen port, TargetPort (default
	// Port) the port dialled on the target. Target is not used here.
	Ports []PortMap `json:"ports"`
}

// Address returns the target's host (FQDN without trailing dot, or IP).
func (t EgressTarget) Address() string {
	if t.IP != "" {
		return t.IP
	}
	return trimDot(t.FQDN)
}

func trimDot(s string) string {
	if len(s) > 0 && s[len(s)-1] == '.' {
		return s[:len(s)-1]
	}
	return s
}
