package config

import "fmt"

// Gateway is the gateway section (RoleGateway): the listeners of one Gateway
// API Gateway on the tailnet node, each with the routes attached to it, as
// the operator resolved them (handlers/gateway): route hostnames already
// intersected with the listener's, backends already resolved to addresses,
// references already checked against ReferenceGrants. The proxy only
// matches and forwards.
type Gateway struct {
	// Listeners are the Gateway's listeners the operator accepted. Several
	// may share a port when they have the same protocol: HTTP listeners
	// are told apart by the Host header, HTTPS and TLS listeners by SNI.
	Listeners []Listener `json:"listeners"`
}

// ListenerProtocol is a Gateway listener's protocol.
type ListenerProtocol string

// The listener protocols.
const (
	// ListenerHTTP serves HTTPRoutes (and GRPCRoutes, over h2c) in
	// cleartext; the tailnet still encrypts it with WireGuard.
	ListenerHTTP ListenerProtocol = "HTTP"
	// ListenerHTTPS terminates TLS with TLS's certificate and serves
	// HTTPRoutes and GRPCRoutes.
	ListenerHTTPS ListenerProtocol = "HTTPS"
	// ListenerTLS passes TLS connections through unterminated, to the
	// TLSRoute whose hostname matches the ClientHello's SNI.
	ListenerTLS ListenerProtocol = "TLS"
	// ListenerTCP forwards connections to TCPRoute backends.
	ListenerTCP ListenerProtocol = "TCP"
	// ListenerUDP forwards datagrams to UDPRoute backends.
	ListenerUDP ListenerProtocol = "UDP"
)

// Listener is one Gateway listener.
type Listener struct {
	// Name is the listener's name on the Gateway (logs and metrics).
	Name string `json:"name"`
	// Port is the port the proxy listens on, on the node's tailnet
	// addresses.
	Port int `json:"port"`
	// Protocol says how the port is served.
	Protocol ListenerProtocol `json:"protocol"`
	// Hostname, for HTTP, HTTPS and TLS, is the host the listener answers
	// for: exact ("app.example.com"), a wildcard suffix ("*.example.com",
	// which matches any number of labels before ".example.com", not
	// "example.com" itself), or empty for any host.
	Hostname string `json:"hostname,omitempty"`
	// TLS is the certificate of an HTTPS listener: mode tailscale-cert
	// (the node's own MagicDNS name) or secret (a kubernetes.io/tls Secret
	// in the proxy's namespace, the operator's copy of the listener's
	// certificateRefs, re-read as the L7 role's is). Unused for other
	// protocols. Listeners sharing a port present their certificates by
	// SNI, with the hostname precedence of routes; a ClientHello without
	// SNI gets the port's first listener's.
	TLS *TLS `json:"tls,omitempty"`
	// Funnel also exposes the listener (HTTPS only, on a port Funnel
	// offers: 443, 8443 or 10000) to the public internet. On the public
	// side the port presents only the certificates of its listeners with
	// Funnel. Where the proxy serves Funnel on its public address instead
	// (proxy.Options.PublicAddr), one port is served there.
	Funnel bool `json:"funnel,omitempty"`
	// HTTPRoutes are the HTTP and HTTPS listener's routes, one entry per
	// route match, in the Gateway API's precedence order: the proxy takes
	// the first entry whose hostname and match fit the request (exact
	// hostnames before wildcards, longer wildcards before shorter, then
	// this order). GRPCRoutes arrive here too, as matches on the path
	// "/<service>/<method>".
	HTTPRoutes []HTTPRoute `json:"httpRoutes,omitempty"`
	// TLSRoutes are the TLS listener's routes, chosen by SNI with the
	// same hostname precedence.
	TLSRoutes []TLSRoute `json:"tlsRoutes,omitempty"`
	// Backends are the TCP or UDP listener's backends (its one TCPRoute
	// or UDPRoute rule), chosen per connection (per UDP flow) by weight;
	// a connection for which none can be picked, or an Invalid one is,
	// is closed (a flow's datagrams dropped).
	Backends []WeightedBackend `json:"backends,omitempty"`
}

// HTTPRoute is one match of one HTTPRoute (or GRPCRoute) rule and what
// the rule does with a request that fits it.
type HTTPRoute struct {
	// Name is "<namespace>/<route>/<rule index>": the route label of
	// metrics, and what logs say.
	Name string `json:"name"`
	// Hostnames are the hosts the entry answers (route hostnames already
	// intersected with the listener's); empty is the listener's Hostname
	// (any host when that is empty too).
	Hostnames []string `json:"hostnames,omitempty"`
	// Match is what the request must fit.
	Match HTTPMatch `json:"match"`
	// Filters change the request or answer it.
	Filters HTTPFilters `json:"filters,omitempty"`
	// Backends receive the requests, one picked per request by weight.
	// None, or every weight zero, answers 500 (unless a filter redirects).
	Backends []WeightedBackend `json:"backends,omitempty"`
	// Plugins are the RoutingPlugins the rule names as ExtensionRef
	// filters, run in order after the table's decision for this entry;
	// they choose only among Backends.
	Plugins []Plugin `json:"plugins,omitempty"`
	// RequestTimeoutMillis bounds the whole request (the rule's
	// timeouts.request); BackendTimeoutMillis one attempt at the backend
	// (timeouts.backendRequest). Zero is no limit. A timeout answers 504.
	// The proxy makes one attempt, so the tighter of the two applies,
	// until the backend's answer has ended.
	RequestTimeoutMillis int64 `json:"requestTimeoutMillis,omitempty"`
	BackendTimeoutMillis int64 `json:"backendTimeoutMillis,omitempty"`
}

// PathMatchType is how an HTTPMatch's path matches.
type PathMatchType string

// The path match types, the Gateway API's.
const (
	// MatchExact matches the path exactly.
	MatchExact PathMatchType = "Exact"
	// MatchPathPrefix matches whole path elements: /foo matches /foo and
	// /foo/bar, not /foobar; a trailing slash on the prefix is ignored.
	MatchPathPrefix PathMatchType = "PathPrefix"
	// MatchRegularExpression matches the whole path against an RE2
	// expression (Go's regexp syntax, anchored at both ends).
	MatchRegularExpression PathMatchType = "RegularExpression"
)

// HTTPMatch is every condition one request must meet.
type HTTPMatch struct {
	// PathType and Path match the request path; an empty PathType is
	// PathPrefix "/" (every path).
	PathType PathMatchType `json:"pathType,omitempty"`
	Path     string        `json:"path,omitempty"`
	// Headers must all match (names case-insensitive).
	Headers []ValueMatch `json:"headers,omitempty"`
	// QueryParams must all match (names exact).
	QueryParams []ValueMatch `json:"queryParams,omitempty"`
	// Method, when set, must equal the request's method (upper case, one
	// of the Gateway API's: GET, HEAD, POST, PUT, DELETE, CONNECT,
	// OPTIONS, TRACE, PATCH).
	Method string `json:"method,omitempty"`
}

// ValueMatch matches one header or query parameter; a request with several
// values of the name matches when one of them does.
type ValueMatch struct {
	// Name is the header or query parameter.
	Name string `json:"name"`
	// Regex makes Value an RE2 expression matched against the whole value;
	// otherwise the value must equal Value.
	Regex bool   `json:"regex,omitempty"`
	Value string `json:"value"`
}

// HTTPFilters are a rule's filters, applied in this order: redirect (which
// answers), then the request header modifier, the URL rewrite and the
// mirrors on the way to the backend, then the response header modifier.
// Redirect and Rewrite exclude each other. Mirrors receive the request as
// the backend does (after the header modifier and the rewrite); bodies
// over 1 MiB or of unknown length are not mirrored.
type HTTPFilters struct {
	// RequestHeaders edits the request sent to the backend.
	RequestHeaders *HeaderModifier `json:"requestHeaders,omitempty"`
	// ResponseHeaders edits the response sent to the client.
	ResponseHeaders *HeaderModifier `json:"responseHeaders,omitempty"`
	// Redirect answers with a redirect instead of forwarding.
	Redirect *Redirect `json:"redirect,omitempty"`
	// Rewrite changes the host and path sent to the backend.
	Rewrite *Rewrite `json:"rewrite,omitempty"`
	// Mirrors receive a copy of each request; their answers are dropped.
	Mirrors []Mirror `json:"mirrors,omitempty"`
}

// HeaderModifier is the Gateway API's header filter. Remove wins over Set
// and Add for one name; Add appends to the request's values (or to Set's).
// Tailscale-* request headers cannot be set: the proxy removes them and
// sets its own, as on every listener.
type HeaderModifier struct {
	// Set replaces each named header's values.
	Set []Header `json:"set,omitempty"`
	// Add appends a value to each named header.
	Add []Header `json:"add,omitempty"`
	// Remove deletes the named headers.
	Remove []string `json:"remove,omitempty"`
}

// Header is one header name and value.
type Header struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// PathModifierType is how a redirect or rewrite changes the path.
type PathModifierType string

// The path modifiers, the Gateway API's.
const (
	// ReplaceFullPath replaces the whole path with Value.
	ReplaceFullPath PathModifierType = "ReplaceFullPath"
	// ReplacePrefixMatch replaces the part the entry's PathPrefix match
	// matched with Value (the rest of the path is kept).
	ReplacePrefixMatch PathModifierType = "ReplacePrefixMatch"
)

// PathModifier changes the request path.
type PathModifier struct {
	Type  PathModifierType `json:"type"`
	Value string           `json:"value"`
}

// Redirect is the Gateway API's RequestRedirect filter. Empty fields keep
// the request's value; Port zero follows the spec (the scheme's
// well-known port when Scheme is set, else the listener's port; a port
// that is the scheme's default is left out of Location).
type Redirect struct {
	Scheme     string        `json:"scheme,omitempty"`
	Hostname   string        `json:"hostname,omitempty"`
	Port       int           `json:"port,omitempty"`
	Path       *PathModifier `json:"path,omitempty"`
	StatusCode int           `json:"statusCode,omitempty"` // default 302
}

// Rewrite is the Gateway API's URLRewrite filter.
type Rewrite struct {
	Hostname string        `json:"hostname,omitempty"`
	Path     *PathModifier `json:"path,omitempty"`
}

// Mirror sends a copy of a share of the requests to Backend.
type Mirror struct {
	Backend Backend `json:"backend"`
	// Percent of requests mirrored (0-100); zero is 100.
	Percent int `json:"percent,omitempty"`
}

// WeightedBackend is one of a rule's backends.
type WeightedBackend struct {
	Backend
	// Weight is the backend's share of requests among the rule's
	// backends (the Gateway API's default is 1; the operator writes it).
	Weight int32 `json:"weight"`
	// Invalid backends (a Service that does not exist, a reference no
	// ReferenceGrant permits) keep their share: the requests that fall on
	// them are answered 500, as the Gateway API requires. Address is
	// empty.
	Invalid bool `json:"invalid,omitempty"`
}

// TLSRoute is one TLSRoute rule on a TLS passthrough listener.
type TLSRoute struct {
	// Name is "<namespace>/<route>/<rule index>".
	Name string `json:"name"`
	// Hostnames are the SNI names the route takes (already intersected
	// with the listener's); empty is the listener's Hostname (any name
	// when that is empty too). A ClientHello whose name no route takes,
	// or whose pick is Invalid, has its connection closed.
	Hostnames []string `json:"hostnames,omitempty"`
	// Backends receive whole connections, by weight.
	Backends []WeightedBackend `json:"backends"`
}

// validate checks the gateway section; fields are reported under
// "gateway." (gatewayvalidate.go has the checks).
func (g *Gateway) validate(add addFunc) {
	if len(g.Listeners) == 0 {
		add("gateway.listeners", "at least one listener is required")
	}
	g.validatePorts(add)
	for i := range g.Listeners {
		g.Listeners[i].validate(fmt.Sprintf("gateway.listeners[%d]", i), add)
	}
}
