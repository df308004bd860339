// Package runtime is a Kopf-style handler runtime on client-go's dynamic
// client: plain functions registered for a resource and a cause (create,
// update, delete, resume, field change, timer, daemon), dispatched by shared
// informers and a rate-limited workqueue, with per-handler progress kept on
// the object.
//
// It is a general-purpose library: it imports client-go, apimachinery,
// Prometheus and charmbracelet/log, and nothing of Tailplane's. It knows
// nothing of Tailscale.
package runtime
