// Package abi holds the names and numbers shared by the plugin host and guest
// SDKs: the http-wasm http_handler ABI (https://http-wasm.io/http-handler-abi)
// and Tailplane's own routing module, tailplane_route_v1.
//
// It imports nothing, so it compiles for both the host and wasip1 guests.
package abi

// HTTPModule is the import module of the http-wasm http_handler ABI.
const HTTPModule = "http_handler"

// RouteModule is the import module of Tailplane's routing extension. The
// version is part of the name so a guest built for another version fails at
// load with a clear message instead of misbehaving at run time.
const RouteModule = RouteModulePrefix + "1"

// RouteModulePrefix starts every version of the routing module's name.
const RouteModulePrefix = "tailplane_route_v"

// RouteVersion is the version of RouteModule, returned by its abi_version.
const RouteVersion = 1

// WASIModule is the WASI preview 1 module Go and AssemblyScript guests import.
const WASIModule = "wasi_snapshot_preview1"

// http-wasm feature flags (enable_features).
const (
	FeatureBufferRequest  uint32 = 1
	FeatureBufferResponse uint32 = 2
	FeatureTrailers       uint32 = 4
)

// Header kinds (get_header_names etc.).
const (
	HeaderRequest         uint32 = 0
	HeaderResponse        uint32 = 1
	HeaderRequestTrailer  uint32 = 2
	HeaderResponseTrailer uint32 = 3
)

// Body kinds (read_body, write_body).
const (
	BodyRequest  uint32 = 0
	BodyResponse uint32 = 1
)

// Log levels (log, log_enabled).
const (
	LogDebug int32 = -1
	LogInfo  int32 = 0
	LogWarn  int32 = 1
	LogError int32 = 2
	LogNone  int32 = 3
)

// Guest exports every plugin must have.
const (
	ExportHandleRequest  = "handle_request"
	ExportHandleResponse = "handle_response"
	ExportMemory         = "memory"
)

// Functions of RouteModule.
const (
	// FnABIVersion () -> i32: RouteVersion.
	FnABIVersion = "abi_version"
	// FnGetRouteHost (buf, limit) -> len: host of the matched route rule.
	FnGetRouteHost = "get_route_host"
	// FnGetRoutePath (buf, limit) -> len: path of the matched route rule.
	FnGetRoutePath = "get_route_path"
	// FnGetBackends (buf, limit) -> count<<32|len: NUL-terminated names the
	// plugin may choose from; the first is the route's default.
	FnGetBackends = "get_backends"
	// FnSetBackend (name, name_len) -> i32: StatusOK or StatusNotAllowed.
	FnSetBackend = "set_backend"
	// FnGetLogin (buf, limit) -> len: caller's tailnet login ("" on Funnel).
	FnGetLogin = "get_login"
	// FnGetNode (buf, limit) -> len: caller's tailnet device name.
	FnGetNode = "get_node"
	// FnGetTags (buf, limit) -> count<<32|len: caller device's ACL tags.
	FnGetTags = "get_tags"
	// FnIsPublic () -> i32: 1 if the request came through Funnel.
	FnIsPublic = "is_public"
	// FnSetFunnel (verdict i32) -> i32: FunnelDeny narrows exposure and
	// returns StatusOK; FunnelAllow returns StatusNotAllowed (never widens).
	FnSetFunnel = "set_funnel"
)

// Results of RouteModule setters.
const (
	StatusOK         int32 = 0
	StatusNotAllowed int32 = 1
)

// Verdicts for set_funnel.
const (
	FunnelDeny  int32 = 0
	FunnelAllow int32 = 1
)

// Capability names a group of RouteModule functions a plugin's config must
// grant before the plugin may import them.
type Capability string

// Capabilities.
const (
	// CapRoute: get_route_host, get_route_path, get_backends, set_backend.
	CapRoute Capability = "route"
	// CapIdentity: get_login, get_node, get_tags.
	CapIdentity Capability = "identity"
	// CapFunnel: is_public, set_funnel.
	CapFunnel Capability = "funnel"
)

// CapabilityOf reports the capability a RouteModule function needs ("" for
// functions every importer gets) and whether fn exists at all.
func CapabilityOf(fn string) (Capability, bool) {
	switch fn {
	case FnABIVersion:
		return "", true
	case FnGetRouteHost, FnGetRoutePath, FnGetBackends, FnSetBackend:
		return CapRoute, true
	case FnGetLogin, FnGetNode, FnGetTags:
		return CapIdentity, true
	case FnIsPublic, FnSetFunnel:
		return CapFunnel, true
	}
	return "", false
}
