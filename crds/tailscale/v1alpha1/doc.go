// Package v1alpha1 holds the Go types of the tailscale.com/v1alpha1 kinds that
// Tailplane serves (Connector, ProxyClass, ProxyGroup), with the field names of
// the official Tailscale operator so that existing manifests keep working.
//
// The CRD YAML files in crds/ are what users install. For ProxyClass and
// ProxyGroup they are generated from these types by controller-gen (go tool
// task crds:generate); the Connector YAML is written by hand. A test in crds/
// checks that every JSON field name here exists in the YAML schema and back.
//
// It imports only Kubernetes API packages.
//
// +kubebuilder:object:generate=true
// +groupName=tailscale.com
package v1alpha1
