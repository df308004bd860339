// Package device is the layer below the proxy pipeline that owns the
// tailnet devices of the workloads the operator runs, whatever runs in
// them (tailplane-proxy today; a recorder or a peer relay would use it the
// same way): a workload is a set of replicas, each with its own config
// Secret, state Secret, auth key and device, named after a
// proxyset.Parent (proxyset.Names.Replica).
//
// It mints the auth key each replica's config must carry (described with
// the replica's name, so that a key minted and never recorded is found and
// revoked), revokes the keys nothing can use any more, reads the replicas
// and the device each one reported in its state Secret, removes replicas
// (device, keys, Secrets) on scale-down and the whole set on deletion, and
// records which parent uses which tailnet hostname. Keys also serves the
// operator's own device (cmd/tailplane-operator): one key path.
//
// What the workload is stays the caller's: the image and the rendered
// objects, and the config format (Devices.KeyInConfig reads the key back
// from a config Secret). The layer never renders.
//
// It may import internal/tailnet, internal/proxystate, handlers/lib/proxyset
// (names, labels, the state keys), Kubernetes client libraries and
// charmbracelet/log; never runtime, handlers/lib/cluster,
// handlers/lib/pipeline or a module.
package device
