// Package proxystate is the contract between the operator and its proxies
// outside the proxy config (proxy/config): the keys a proxy writes into its
// state Secret and the operator reads, and the labels, annotations and
// finalizer, with the official operator's names, that the operator puts on
// proxies' objects and reads from parents. Declaring them once keeps the
// writer (internal/kubestate, cmd/tailplane-proxy) and the readers
// (handlers/) from drifting apart.
//
// It imports only the standard library: the proxy, the operator and tests may all import it.
package proxystate

import "time"

// Keys of a proxy's state Secret besides tailscaled's own state: the
// containerboot status keys (tailscale.com/kube/kubetypes) plus Tailplane's
// config_error, plugin_status, tailscale_services and recent_peers.
const (
	// KeyDeviceID is the device's stable node ID; set once the proxy is
	// logged in.
	KeyDeviceID = "device_id"
	// KeyDeviceFQDN is the device's MagicDNS name, with the trailing dot.
	KeyDeviceFQDN = "device_fqdn"
	// KeyDeviceIPs is a JSON list of the device's tailnet addresses.
	KeyDeviceIPs = "device_ips"
	// KeyDeviceAdvertisedRoutes is a JSON list of the routes the device
	// advertises (a connector's subnet and exit routes; [] otherwise).
	KeyDeviceAdvertisedRoutes = "device_advertised_routes"
	// KeyDeviceApprovedRoutes is a JSON list of those the control plane
	// approved (the device's own netmap says so).
	KeyDeviceApprovedRoutes = "device_approved_routes"
	// KeyPodUID is the UID of the Pod that wrote the keys above.
	KeyPodUID = "pod_uid"
	// KeyConfigApplied is the UID of the Pod whose proxy last applied its
	// config without error; cleared when a proxy starts, so that a
	// restarted replica is not counted as serving before it does.
	KeyConfigApplied = "config_applied"
	// KeyConfigError is why the proxy refused its current config; absent
	// when it accepted it.
	KeyConfigError = "config_error"
	// KeyPluginStatus is a JSON list of PluginReport, one per routing
	// plugin in the proxy's config.
	KeyPluginStatus = "plugin_status"
	// KeyServices is a JSON object of ServiceReport by Tailscale Service
	// name ("svc:web"): what an ingress ProxyGroup replica hosts.
	KeyServices = "tailscale_services"
	// KeyRecentPeers is a JSON list of the tailnet addresses of the peers
	// the proxy had WireGuard sessions with recently, rewritten while it
	// runs (when the set changes) and when it stops; the next process of
	// the same device pings them before it reports ready (proxy/peers.go).
	// Written and read by the proxy only.
	KeyRecentPeers = "recent_peers"
)

// Labels and annotations with the official operator's keys.
const (
	LabelManaged            = "tailscale.com/managed"
	LabelParentName         = "tailscale.com/parent-resource"
	LabelParentNamespace    = "tailscale.com/parent-resource-ns"
	LabelParentType         = "tailscale.com/parent-resource-type"
	LabelSecretType         = "tailscale.com/secret-type"
	LabelApp                = "app"
	LabelAnnotationProxyCls = "tailscale.com/proxy-class"

	AnnotationTags     = "tailscale.com/tags"
	AnnotationHostname = "tailscale.com/hostname"

	// Finalizer is the official operator's finalizer on parents.
	Finalizer = "tailscale.com/finalizer"
)

// PluginReport is one routing plugin as a proxy reports it under
// KeyPluginStatus (from plugins.Status); the operator turns the reports into
// the RoutingPlugin's status.
type PluginReport struct {
	// Name is the RoutingPlugin's "<namespace>/<name>".
	Name   string `json:"name"`
	Loaded bool   `json:"loaded"`
	SHA256 string `json:"sha256,omitempty"`
	Error  string `json:"error,omitempty"`
	// Failures are the serving module's failures at run time (traps,
	// timeouts, no instance free, invalid answers); nil while none failed.
	Failures *PluginFailures `json:"failures,omitempty"`
}

// PluginFailures are one plugin's run-time failures in one proxy, as of
// the report. A proxy writes the report when the plugin starts failing,
// at most every few seconds while it keeps failing, and when its recent
// window holds no failure any more; not for every request.
type PluginFailures struct {
	// Since is when the serving module was loaded; Requests and Failed
	// count from there.
	Since    time.Time `json:"since"`
	Requests uint64    `json:"requests"`
	Failed   uint64    `json:"failed"`
	// ByClass splits Failed by class: trap, timeout, busy, invalid.
	ByClass map[string]uint64 `json:"byClass,omitempty"`
	// WindowSeconds is the length of the recent window that
	// RecentRequests and RecentFailed count, ending at the report.
	WindowSeconds  int    `json:"windowSeconds"`
	RecentRequests uint64 `json:"recentRequests"`
	RecentFailed   uint64 `json:"recentFailed"`
	// LastError is the last failure's error on one line (with the
	// guest's panic message if it printed one), at LastFailure.
	LastError   string    `json:"lastError,omitempty"`
	LastFailure time.Time `json:"lastFailure"`
}

// ServiceReport is how one ProxyGroup replica hosts one Tailscale Service,
// as it reports it under KeyServices.
type ServiceReport struct {
	// Advertised is true while the replica advertises the service: it
	// serves it, and control may send clients to it.
	Advertised bool `json:"advertised"`
	// Error is why the replica does not advertise it (no certificate yet,
	// a listener it could not open); empty when Advertised.
	Error string `json:"error,omitempty"`
}
