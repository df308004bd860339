// Package v1alpha1 holds the Go types of the eight tailscale.com/v1alpha1
// kinds of the official Tailscale operator (Connector, ProxyClass, ProxyGroup,
// DNSConfig, Recorder, Tailnet, ProxyGroupPolicy, PeerRelay), with its field
// names, validation and CEL messages, so that existing manifests keep working.
//
// The CRD YAML files in crds/ are what users install. Except for Connector
// (written by hand) they are generated from these types by controller-gen (go
// tool task crds:generate). A test in crds/ checks that every JSON field name
// here exists in the YAML schema and back; another checks on a real API
// server that each CRD accepts and refuses the same objects, with the same
// messages, as the official one.
//
// It imports only Kubernetes API packages.
//
// +kubebuilder:object:generate=true
// +groupName=tailscale.com
package v1alpha1
