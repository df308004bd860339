// Package cluster is what every handler module gets (Deps: settings, the tailnet
// backend, the runtime, clients) and the cluster writes they share:
// server-side apply of typed objects (skipping identical applies), a proxy's
// objects with its ProxyClass and metrics Service, status patches, Events on
// any kind, the indexes that find parents from what they name (ProxyClass,
// IngressClass, backends), ExternalName resolution, and Retry, which maps
// tailnet API errors to the runtime's retry semantics.
//
// The proxy lifecycle itself is handlers/lib/pipeline; resource names are
// handlers/lib/resources; condition lists are handlers/lib/conditions.
//
// It imports runtime/, internal/tailnet, internal/proxystate,
// handlers/lib/proxyset, handlers/lib/settings, handlers/lib/opmetrics, handlers/lib/proxyclassrules,
// handlers/lib/resources, crds/ and Kubernetes client libraries. Render steps
// never import it: they stay pure.
package cluster
