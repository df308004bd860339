// Package benchruntime compares Tailplane's runtime with a controller-runtime
// reconciler doing the same work against the same real kube-apiserver: each
// side runs as its own process (cmd/runtime-op, cmd/crt-op) so that its peak
// RSS can be read from /proc. It lives in a module of its own so that the
// main module never depends on controller-runtime.
//
// It imports Tailplane's runtime and internal/testenv (harness only) and
// controller-runtime (cmd/crt-op only).
package benchruntime
