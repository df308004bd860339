// Package benchmark compares tailplane-proxy with tailscale's own serve,
// side by side in one run: both run as separate processes on the same
// in-process tailnet (internal/tailnettest), in front of the same loopback
// backend, and are driven by one client node. See bench_test.go and
// `go tool task bench:proxy`.
//
// It holds only benchmarks and the servenode helper command.
package benchmark
