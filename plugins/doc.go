// Package plugins runs users' WebAssembly routing plugins in the proxy. A
// Manager holds the ordered chain of loaded plugins and is itself one
// route.Router, so the proxy appends it to its chain after the routing
// table:
//
//	m, err := plugins.New(plugins.Options{CacheDir: dir, Kube: kube})
//	statuses := m.Apply(ctx, specs) // on every config change; never on the request path
//	chain := []route.Router{table, m}
//
// SpecFromRoutingPlugin maps a RoutingPlugin object to a Spec; Apply
// fetches its module from the named ConfigMap or Secret key, or from the
// operator's chunked copy (secretChunks), and keeps it on disk by sha256
// (CacheDir/modules) so a restart does not read it again. Registries and
// URLs are the operator's business (plugins/remote): proxies never hold
// registry credentials.
//
// Apply loads new and changed plugins off the request path (compile through
// wazero's file cache, pre-warm instances) and swaps the chain atomically;
// requests in flight finish on the generation they started with.
//
// The wazero host is plugins/host, the Kubernetes module fetch
// plugins/source, the operator's registry and HTTPS fetch plugins/remote,
// the guest SDK plugins/sdk, the author's build and push tool
// plugins/cmd/tailplane-plugin.
//
// It may import wazero, client-go, Prometheus, charmbracelet/log, its own
// subpackages and proxy/route; never handlers/, runtime/ or the rest of proxy/.
package plugins
