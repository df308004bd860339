// Package plugin is the handler module of Tailplane's RoutingPlugin kind
// (tailplane.dev/v1alpha1): it fetches the plugin's WebAssembly module from
// an OCI registry, an HTTPS URL, or the ConfigMap or Secret the plugin
// names (size limit and sha256 pin checked first), validates it by
// compiling it with the proxies' own host (plugins/host), stores one copy
// per digest in Secrets of the operator namespace where the targeted
// proxies may read it, puts it into the config of every targeted Ingress
// proxy, and reports status: Accepted, Ready and Degraded conditions with
// reasons, the module's sha256 and size, and the proxies that loaded it with
// their run-time failures, re-read whenever a proxy rewrites its report. A
// module that cannot be fetched or compiled never replaces the serving one.
//
// plugin.go is the pure part (decoding, targets, the proxy config entry);
// register.go is the apply step, fetch.go the sources and pull policy,
// store.go the content-addressed copies, health.go the proxies' failure
// reports (Degraded, its Warning Event, the watch of their state Secrets). It imports runtime/, handlers/lib/cluster,
// handlers/lib/proxyset, proxy/config, plugins/host (compile-only use: the
// operator never runs a plugin), plugins/source and plugins/remote.
package plugin
