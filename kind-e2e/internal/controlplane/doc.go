// Package controlplane runs a real Kubernetes control plane on loopback: an
// embedded etcd and kube-apiserver (and, for devcluster up, Kubernetes'
// controllers, internal/controllers, in a child named kube-controller-manager)
// as child processes of the devcluster binary.
//
// It may import k8s.io/kubernetes and etcd; it lives in the kind-e2e module so
// that the product module never does.
package controlplane
