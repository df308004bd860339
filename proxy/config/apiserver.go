package config

// RoleKubeAPIServer is a replica of a kube-apiserver ProxyGroup: it hosts
// one Tailscale Service (APIServer.ServiceName) on port 443 with the
// group's shared certificate, and forwards its requests to the cluster's
// API server (proxy/apiserver).
const RoleKubeAPIServer Role = "kube-apiserver"

// APIServerMode says how callers are authenticated to the API server.
type APIServerMode string

// The API server proxy modes, as the official ProxyGroup's
// kubeAPIServer.mode.
const (
	// APIServerAuth impersonates the tailnet caller (login name, or a
	// tagged device's MagicDNS name) and the groups of its
	// tailscale.com/cap/kubernetes capability, with the proxy's own
	// ServiceAccount credentials.
	APIServerAuth APIServerMode = "auth"
	// APIServerNoAuth forwards with no credentials of the proxy: the
	// caller's own Authorization header authenticates it.
	APIServerNoAuth APIServerMode = "noauth"
)

// APIServer is the kube-apiserver section. Every replica of the group gets
// the same section but for TLS.Issue.
type APIServer struct {
	// Mode is auth (default when empty) or noauth.
	Mode APIServerMode `json:"mode,omitempty"`
	// ServiceName is the Tailscale Service, "svc:<dns label>"; clients
	// reach https://<label>.<tailnet domain>.
	ServiceName string `json:"serviceName"`
	// TLS must be mode shared: the replica with Issue obtains and renews
	// the service's certificate into SecretName, the others serve it
	// from there.
	TLS TLS `json:"tls"`
}

// EffectiveMode returns Mode, defaulting to auth.
func (a *APIServer) EffectiveMode() APIServerMode {
	if a.Mode == "" {
		return APIServerAuth
	}
	return a.Mode
}

func (a *APIServer) validate(add addFunc) {
	switch a.EffectiveMode() {
	case APIServerAuth, APIServerNoAuth:
	default:
		add("apiServer.mode", "unknown mode %q (want %q or %q)", a.Mode, APIServerAuth, APIServerNoAuth)
	}
	if !serviceName.MatchString(a.ServiceName) {
		add("apiServer.serviceName", "%q is not a Tailscale Service name (want \"svc:<dns label>\")", a.ServiceName)
	}
	if a.TLS.EffectiveMode() != TLSShared {
		add("apiServer.tls.mode", "must be %q (the replicas share the service's certificate)", TLSShared)
	}
	if a.TLS.SecretName == "" {
		add("apiServer.tls.secretName", "is required")
	}
}
