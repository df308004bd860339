// Package benchmark compares tailplane-proxy with tailscale's own serve,
// side by side in one run: both run as separate processes on the same
// in-process tailnet (internal/tailnettest), in front of the same loopback
// backend, and are driven by one client node. See bench_test.go and
// `go tool task bench:proxy`.
//
// BenchmarkConnector (connector_test.go) compares TCP through
// tailplane-proxy as a subnet router and as an exit node with direct
// tailnet TCP between two nodes, in one run, with the tcpnode helper
// command as the data end of every path.
//
// It holds only benchmarks and the servenode and tcpnode helper commands.
package benchmark
