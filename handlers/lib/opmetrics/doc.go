// Package opmetrics holds the operator's own Prometheus metrics beyond the
// runtime's (queue, handlers, patches): tailnet API calls and errors, auth
// keys minted and revoked, and each ProxyGroup's replicas, the replicas
// advertising each of its Tailscale Services and its failovers. They go to
// a registry the caller passes in (the runtime's, served on /metrics);
// there is no package-level registry. A nil *Metrics records nothing, so
// tests that need no metrics pass none.
//
// Labels stay bounded: operations are fixed names, codes HTTP statuses,
// and ProxyGroups and Tailscale Services are objects of the cluster; no
// label names a client.
//
// It imports internal/tailnet, the Prometheus client and the standard
// library.
package opmetrics
