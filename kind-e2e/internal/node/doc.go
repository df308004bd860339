// Package node is devcluster's process node: it registers a Ready Node, binds
// pending pods to it (a tiny scheduler), and runs each container whose image
// is in the image map as a host process in its own mount namespace, with the
// pod's volumes at their mountPaths, its own pod IP, resolved env, probes,
// restarts with back-off, grace periods and pod status. It also serves the
// kubelet log endpoint so `kubectl logs` works.
//
// It may import client-go, the Kubernetes API types, charmbracelet/log and
// golang.org/x/sys/unix; never the product module.
package node
