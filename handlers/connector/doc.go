// Package connector serves the tailscale.com/v1alpha1 Connector: a
// StatefulSet of replicas on the proxy pipeline, each a tailnet device that
// is a subnet router, an exit node or an app connector (proxy role
// connector). connector.go is pure (validation, hostnames, the plan and its
// configs, status); register.go adds it to the pipeline.
//
// It may import handlers/lib/pipeline, handlers/lib/cluster, handlers/lib/proxyset,
// handlers/lib/proxyclassrules, handlers/lib/settings, crds/ and proxy/config.
package connector
