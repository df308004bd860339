// Package proxyclassrules holds the pure rules of ProxyClass (tailscale.com/
// v1alpha1), which the ProxyClass module (handlers/proxyclass) and every
// proxy's apply (handlers/lib/cluster) share: validating a ProxyClass beyond
// what its CRD schema checks (label and annotation syntax, image references,
// static endpoint ranges), the ProxyClassReady condition, the Events to
// warn about overridden Tailscale env vars, and applying a Ready ProxyClass
// to a proxy's StatefulSet the way the official operator does.
//
// It imports Kubernetes API types and validation, crds/tailscale/v1alpha1,
// handlers/lib/proxyset and github.com/distribution/reference (the image
// reference rules the kubelet uses).
package proxyclassrules
