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
// fetches its module from the named ConfigMap or Secret key.
//
// Apply loads new and changed plugins off the request path (compile through
// wazero's file cache, pre-warm instances) and swaps the chain atomically;
// requests in flight finish on the generation they started with.
//
// The wazero host is plugins/host, the Kubernetes module fetch
// plugins/source, the guest SDK plugins/sdk.
//
// It may import wazero, client-go, Prometheus, charmbracelet/log, its own
// subpackages and proxy/route; never handlers/, runtime/ or the rest of proxy/.
package plugins
