// Package route defines how tailplane-proxy decides what to do with one HTTP
// request: the request as a router sees it, the route it matched, and the
// Decision (forward to a backend, redirect, deny, edit headers, narrow
// Funnel exposure).
//
// The proxy's built-in routing tables (proxy/routetable for Ingress,
// proxy/gatewaytable for the Gateway API) and the WASM plugin host
// (plugins/) implement Router. This package imports only the standard
// library, so both proxy/ and plugins/ can depend on it.
package route

import (
	"context"
	"net/http"
	"time"
)

// Identity is the tailnet identity of the caller, from the proxy's WhoIs.
// It is never read from request headers.
type Identity struct {
	LoginName     string
	DisplayName   string
	ProfilePicURL string
	// NodeName is the caller's device name (FQDN without the trailing dot).
	NodeName string
	// Tags are the caller device's ACL tags; empty for user-owned devices.
	Tags []string
}

// Backend is one upstream a route may send requests to.
type Backend struct {
	// Name identifies the backend on the route, e.g. "<service>:<port>".
	// Plugins choose backends by this name.
	Name string
	// Address is the host:port dialled, e.g. the Service's ClusterIP:port.
	Address string
}

// Route is the routing-table entry a request matched.
type Route struct {
	// Name labels the route in metrics and logs (a Gateway API rule's
	// "<namespace>/<route>/<rule index>"); when empty, Host and Path do.
	Name string
	// Host is the rule's host ("" for any, "*.example.com" for a wildcard).
	Host string
	// Path is the rule's path and PathType its match kind.
	Path     string
	PathType string
	// Backends are the backends this route may use; the first is the default.
	// A router may only ever pick one of these.
	Backends []Backend
}

// Request is what a router sees of one request. Routers must not modify
// Header; they ask for edits through the Decision.
type Request struct {
	Method string
	Host   string
	// URI is the request-target as received: path and query.
	URI    string
	Path   string
	Header http.Header
	// Identity is nil when the caller is not a tailnet node (Funnel).
	Identity *Identity
	// Public reports that the request came through Funnel or the public
	// listener. It is set from the listener, never from a header.
	Public bool
	// Route is the matched route, nil when nothing matched.
	Route *Route
}

// Action is what to do with a request.
type Action int

const (
	// Forward sends the request to Decision.Backend.
	Forward Action = iota
	// Redirect answers Decision.Status (3xx) with Location: Decision.Location.
	Redirect
	// Deny answers Decision.Status with the short Decision.Body, without
	// reaching a backend: 2xx, 4xx and 5xx are sent as given, anything
	// else as 403.
	Deny
)

// Decision is a router's answer for one request.
type Decision struct {
	Action Action
	// Backend is the chosen backend for Forward; nil means the route's default.
	Backend *Backend
	// Status is the response code for Redirect and Deny.
	Status int
	// Location is the redirect target for Redirect.
	Location string
	// Body is the short response body for Deny.
	Body string
	// SetRequestHeaders and RemoveRequestHeaders edit the upstream request;
	// SetResponseHeaders edits the response to the client.
	SetRequestHeaders    http.Header
	RemoveRequestHeaders []string
	SetResponseHeaders   http.Header
	// DenyPublic refuses the request if it came through Funnel. A router can
	// only narrow exposure: there is no way to allow what the config denies.
	DenyPublic bool
	// RewriteURI, when set, replaces the request-target (path and query,
	// already encoded) sent upstream; plugins set it with http-wasm set_uri.
	RewriteURI string
	// Method, when set, replaces the request method sent upstream (http-wasm
	// set_method).
	Method string
	// Host, when set, replaces the Host sent upstream (a Gateway API URL
	// rewrite); X-Forwarded-Host keeps the client's.
	Host string
	// AddResponseHeaders appends values to the response's headers (after
	// the backend's); RemoveResponseHeaders deletes the backend's.
	AddResponseHeaders    http.Header
	RemoveResponseHeaders []string
	// Mirrors receive a copy of a forwarded request; their answers are
	// dropped. The proxy's own table sets them from the config.
	Mirrors []Backend
	// Timeout, when above zero, bounds a forwarded request until the
	// backend's answer ends; when it passes first the client gets 504.
	Timeout time.Duration
}

// Router makes the routing decision for one request. The proxy calls it after
// matching the routing table; a chain of routers (the table, then plugins in
// order) each refines the previous decision.
type Router interface {
	Route(ctx context.Context, req *Request, prev Decision) (Decision, error)
}

// RouterFunc adapts a function to Router.
type RouterFunc func(ctx context.Context, req *Request, prev Decision) (Decision, error)

// Route calls f.
func (f RouterFunc) Route(ctx context.Context, req *Request, prev Decision) (Decision, error) {
	return f(ctx, req, prev)
}
