// Package config is the versioned proxy configuration schema: the JSON the
// operator writes into a proxy's config Secret and the proxy reads.
//
// It is the only part of proxy/ that handlers may import, so it imports
// nothing of Tailplane's and only the standard library.
package config
