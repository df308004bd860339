// Package imagebuild builds Tailplane's container images without a container
// engine: it cross-compiles each command (CGO_ENABLED=0, -trimpath, stripped)
// per platform, wraps each binary in a single-layer OCI image on an empty base,
// joins the platforms into one OCI image index per command, writes the indexes
// as OCI image layouts and pushes them to a registry.
//
// Images are reproducible: every timestamp is the source date (the commit
// time or SOURCE_DATE_EPOCH), so the same source, version and platforms give
// the same digests.
//
// It imports go-containerregistry, charmbracelet/log and the standard library;
// nothing of Tailplane's.
package imagebuild
