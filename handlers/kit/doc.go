// Package kit is what every handler module gets (Deps: settings, the tailnet
// backend, the runtime, clients) and the cluster writes they share:
// server-side apply of typed objects (skipping identical applies), a proxy's
// objects with its ProxyClass and metrics Service, status patches, Events on
// any kind, the indexes that find parents from what they name (ProxyClass,
// IngressClass, backends), ExternalName resolution, and Retry, which maps
// tailnet API errors to the runtime's retry semantics.
//
// The proxy lifecycle itself is handlers/pipeline; resource names are
// handlers/resources; condition lists are handlers/conditions.
//
// It imports runtime/, internal/tailnet, internal/proxystate,
// handlers/proxyset, handlers/settings, handlers/proxyclass,
// handlers/resources, crds/ and Kubernetes client libraries. Render steps
// never import it: they stay pure.
package kit
