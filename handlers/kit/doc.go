// Package kit is the shared apply step of the handler modules: the
// dependencies every module gets (settings, the tailnet backend, the runtime,
// clients), server-side apply of a proxy's objects, auth keys minted only when
// a proxy has neither a device nor an unused key, proxy cleanup (device
// through the API, then objects), status conditions and Events on parents,
// and the runtime Enqueue and Watch mappings through which a module
// re-handles a parent when something other than the parent changed (its
// proxy's state Secret, a backend Service, its ProxyClass, the IngressClass).
//
// It imports runtime/, internal/tailnet, internal/proxystate,
// handlers/proxyset, handlers/settings, handlers/proxyclass, crds/ and
// Kubernetes client libraries. Render steps never import it: they stay pure.
package kit
