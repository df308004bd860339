// Package gatewaytable is the route table of the proxy's gateway role
// (config.RoleGateway), what proxy/routetable is for Ingress: built once per
// listener port from the config and immutable afterwards, it matches an
// HTTP request (host, then path, headers, query parameters and method, in
// the Gateway API's precedence) and, as a route.Router, turns the match into
// a decision: a backend picked by weight with the rule's header edits, URL
// rewrite, mirrors and timeout, a redirect, or a 404 or 500. It also picks
// the backends of TLS passthrough listeners by SNI (SNITable) and of TCP and
// UDP listeners by weight (Split), and finds the certificate of an HTTPS
// listener by SNI (Hosts).
//
// It imports only proxy/config, proxy/route and the standard library.
package gatewaytable

import (
	"iter"
	"net"
	"strings"
)

// Hosts indexes values by Gateway API hostname: exact ("app.example.com"),
// wildcard ("*.example.com", matching one or more labels before
// ".example.com" but not "example.com" itself) or empty (any host). Build
// it with Add, then only read it: it is safe for concurrent reads.
type Hosts[T any] struct {
	exact    map[string][]T // by lower-case host
	wildcard map[string][]T // by the lower-case suffix after "*."
	anyHost  []T
}

// Add files v under hostname, after the values already there.
func (h *Hosts[T]) Add(hostname string, v T) {
	if h.exact == nil {
		h.exact, h.wildcard = map[string][]T{}, map[string][]T{}
	}
	name := normalize(hostname)
	switch {
	case name == "":
		h.anyHost = append(h.anyHost, v)
	case strings.HasPrefix(name, "*."):
		h.wildcard[name[2:]] = append(h.wildcard[name[2:]], v)
	default:
		h.exact[name] = append(h.exact[name], v)
	}
}

// Candidates yields the values whose hostname fits host (a port is
// ignored), most specific first: the exact host's, then the wildcards'
// from the longest suffix to the shortest, then the any-host values; each
// hostname's values in the order they were added.
func (h *Hosts[T]) Candidates(host string) iter.Seq[T] {
	host = normalize(StripPort(host))
	return func(yield func(T) bool) {
		if host != "" {
			for _, v := range h.exact[host] {
				if !yield(v) {
					return
				}
			}
			for rest := host; ; {
				_, suffix, ok := strings.Cut(rest, ".")
				if !ok || suffix == "" {
					break
				}
				for _, v := range h.wildcard[suffix] {
					if !yield(v) {
						return
					}
				}
				rest = suffix
			}
		}
		for _, v := range h.anyHost {
			if !yield(v) {
				return
			}
		}
	}
}

// First returns the first of Candidates(host).
func (h *Hosts[T]) First(host string) (T, bool) {
	for v := range h.Candidates(host) {
		return v, true
	}
	var zero T
	return zero, false
}

// normalize lower-cases a host name and drops a trailing dot, as DNS
// compares names.
func normalize(host string) string {
	return strings.ToLower(strings.TrimSuffix(host, "."))
}

// StripPort returns host without a ":port" suffix.
func StripPort(host string) string {
	if !strings.Contains(host, ":") {
		// The usual Host; SplitHostPort would allocate its error.
		return host
	}
	if h, _, err := net.SplitHostPort(host); err == nil {
		return h
	}
	return host
}
