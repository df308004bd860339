package config

// L7 is the ingress-l7 section: HTTPS on port 443, optional HTTP on 80,
// optional Funnel, and the routing table.
type L7 struct {
	// TLS chooses where the serving certificate comes from.
	TLS TLS `json:"tls"`
	// HTTPRedirect makes port 80 answer 301 to https://<host><uri>.
	HTTPRedirect bool `json:"httpRedirect,omitempty"`
	// PlainHTTP serves the routes on port 80 without TLS (tailnet only;
	// traffic is still encrypted by WireGuard). Excludes HTTPRedirect.
	PlainHTTP bool `json:"plainHTTP,omitempty"`
	// Funnel also exposes port 443 to the public internet through
	// Tailscale Funnel (or the proxy's public listen address where the
	// control server has no Funnel).
	Funnel bool `json:"funnel,omitempty"`
	// Rules route by host, then path. The longest matching path wins.
	Rules []Rule `json:"rules,omitempty"`
	// DefaultBackend serves requests no rule matches; without it they get 404.
	DefaultBackend *Backend `json:"defaultBackend,omitempty"`
	// ExtraBackends are offered on every route, after the route's own
	// backend, for routers (plugins) to choose with set_backend; without a
	// router choosing one they receive nothing (a canary Service, say).
	ExtraBackends []Backend `json:"extraBackends,omitempty"`
}

// TLSMode says where the L7 certificate comes from.
type TLSMode string

// The TLS modes.
const (
	// TLSTailscaleCert uses the node's own <hostname>.<tailnet>.ts.net
	// certificate, issued through the control server.
	TLSTailscaleCert TLSMode = "tailscale-cert"
	// TLSSecret uses a kubernetes.io/tls Secret in the proxy's namespace.
	TLSSecret TLSMode = "secret"
	// TLSFiles reads PEM files (local runs without a cluster).
	TLSFiles TLSMode = "files"
	// TLSShared is the certificate of a Tailscale Service hosted by a
	// ProxyGroup, shared by its replicas through the kubernetes.io/tls
	// Secret SecretName: the replica with Issue obtains and renews it
	// through the control server and writes it there; the others read
	// it, so that one certificate is issued per name, not per replica.
	TLSShared TLSMode = "shared"
	// TLSNone serves no HTTPS: the routes are served on port 80 only
	// (PlainHTTP is required), for an Ingress without a certificate of its
	// own on a control server that issues none (Headscale).
	TLSNone TLSMode = "none"
)

// TLS is the L7 certificate source.
type TLS struct {
	// Mode is tailscale-cert (default when empty), secret, files, shared
	// or none.
	Mode TLSMode `json:"mode,omitempty"`
	// SecretName is the kubernetes.io/tls Secret for Modes secret and
	// shared.
	SecretName string `json:"secretName,omitempty"`
	// Issue makes this proxy the one that issues and renews a shared
	// certificate (Mode shared).
	Issue bool `json:"issue,omitempty"`
	// CertFile and KeyFile are PEM paths for Mode files.
	CertFile string `json:"certFile,omitempty"`
	KeyFile  string `json:"keyFile,omitempty"`
}

// EffectiveMode returns Mode, defaulting to tailscale-cert.
func (t TLS) EffectiveMode() TLSMode {
	if t.Mode == "" {
		return TLSTailscaleCert
	}
	return t.Mode
}

// Rule is the set of paths served for one host.
type Rule struct {
	// Host is an exact host ("app.example.com"), a wildcard matching one
	// label ("*.example.com"), or empty for any host.
	Host string `json:"host,omitempty"`
	// Paths are matched longest first.
	Paths []Path `json:"paths"`
}

// PathType is how a rule's path matches, as in Kubernetes Ingress.
type PathType string

// The path types.
const (
	// PathExact matches the path exactly (case-sensitive).
	PathExact PathType = "Exact"
	// PathPrefix matches whole path elements: /foo matches /foo and
	// /foo/bar but not /foobar.
	PathPrefix PathType = "Prefix"
	// PathImplementationSpecific is treated as Prefix.
	PathImplementationSpecific PathType = "ImplementationSpecific"
)

// Path is one path of a rule and where it goes.
type Path struct {
	// Path starts with "/".
	Path string `json:"path"`
	// PathType defaults to Prefix when empty.
	PathType PathType `json:"pathType,omitempty"`
	// Backend receives matching requests.
	Backend Backend `json:"backend"`
}

// Backend is a cluster Service reached at its ClusterIP, or by DNS name
// (an ExternalName Service's target, a headless Service's name).
type Backend struct {
	// Service names the backend, conventionally "<namespace>/<name>:<port>";
	// it shows up in metrics and is what routing plugins select by.
	Service string `json:"service"`
	// Address is host:port, where host is a ClusterIP or a DNS name the
	// proxy resolves on every new connection.
	Address string `json:"address"`
	// HTTPS makes the proxy speak TLS to the backend without verifying
	// its certificate (the official operator's https+insecure).
	HTTPS bool `json:"https,omitempty"`
	// H2C makes the proxy speak HTTP/2 without TLS to the backend (a
	// Service port with appProtocol kubernetes.io/h2c: gRPC backends).
	// It excludes HTTPS.
	H2C bool `json:"h2c,omitempty"`
}
