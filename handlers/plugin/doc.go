// Package plugin is the handler module of Tailplane's RoutingPlugin kind
// (tailplane.dev/v1alpha1): it fetches the plugin's WebAssembly module from
// the ConfigMap or Secret the plugin names, validates it by compiling it
// with the proxies' own host (plugins/host), copies it into the operator
// namespace where the targeted proxies may read it, puts it into the config
// of every targeted Ingress proxy, and reports status: Accepted and Ready
// conditions with reasons, the module's sha256 and size, and the proxies
// that loaded it.
//
// plugin.go is the pure part (decoding, targets, the proxy config entry);
// register.go is the apply step. It imports runtime/, handlers/kit,
// handlers/proxyset, proxy/config, plugins/host (compile-only use: the
// operator never runs a plugin) and plugins/source.
package plugin
