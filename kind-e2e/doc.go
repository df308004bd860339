// Package e2e is the home of Tailplane's end-to-end tooling, in a module of its
// own so that k8s.io/kubernetes never enters the product module:
// cmd/devcluster (a real control plane, and later a process node and a
// tailnet, on loopback) and the Ginkgo suites that run against it or against
// kind/k3d clusters.
//
// It may import the product module and k8s.io/kubernetes; the product module
// never imports it.
package e2e
