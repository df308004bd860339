// Package host runs one WebAssembly routing plugin on wazero: it implements
// the http-wasm http_handler ABI and Tailplane's tailplane_route_v1 module,
// validates and compiles the module (through a shared file compilation
// cache), keeps a bounded pool of pre-warmed instances, puts a deadline on
// every call and a memory cap on every instance, discards instances that trap
// or time out, and turns what the guest did into a route.Decision. It counts
// each plugin's run-time failures (Plugin.Failures) and logs them one line
// per class per interval, with the guest's panic message.
//
// A *Plugin is a route.Router (routing mode) and also an http middleware
// (Plugin.Middleware) with the full http-wasm request/response semantics.
//
// It may import wazero, Prometheus, charmbracelet/log, plugins/sdk/abi and
// proxy/route; nothing else of ours.
package host
