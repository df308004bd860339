// Package crds holds Tailplane's CustomResourceDefinitions: the YAML files in
// this folder are the single source of truth for the schemas (group
// tailscale.com for the kinds compatible with the official operator,
// tailplane.dev for our own), embedded here so that tests and the operator
// install exactly what users install.
//
// It imports only the standard library and Kubernetes API types.
package crds
