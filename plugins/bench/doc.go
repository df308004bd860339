// Package bench measures the plugin host side by side with the alternative,
// in one run (`go tool task bench:plugins`):
//
//   - BenchmarkDecision: one routing decision (header canary) by a native Go
//     router, the Go guest (with and without the per-call deadline) and the
//     AssemblyScript guest, at 1 and 16 concurrent callers; p50/p99 latency.
//   - BenchmarkDecisionParts: where the Go guest's decision time goes, one
//     step at a time (testdata/parts: an empty handler with and without the
//     deadline, a header read, the backends, set_backend, all three).
//   - BenchmarkHTTP: requests/s through the proxy's L7 handler (proxy/l7:
//     routing table, chain, reverse proxy to a real backend over loopback)
//     with and without a plugin in the chain, 16 concurrent clients.
//   - BenchmarkColdLoad: Engine.Load (validate, compile or file-cache hit,
//     one pre-warmed instance) for each guest.
//   - BenchmarkInstanceMemory: Go heap and linear memory per instance.
//
// The table subcommand turns the output into the Markdown table of
// docs/performance.md. Test-only: it imports plugins/..., proxy/l7,
// proxy/routetable, proxy/config and proxy/metrics to measure through them.
package bench
