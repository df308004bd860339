// Package plugins runs users' WebAssembly routing plugins in the proxy: an
// http-wasm http_handler host and Tailplane's own routing module on wazero,
// with a bounded instance pool, per-call deadlines and memory caps.
//
// It may import wazero and proxy/route; never handlers/, runtime/ or the rest
// of proxy/.
package plugins
