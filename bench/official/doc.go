// Package official runs Tailplane side by side with the official Tailscale
// operator (tailscale.com v1.102.5) on one devcluster and one tailnet, and
// compares what each produces for the same manifests and how fast and how
// large each is (go tool task bench:official; issue 20).
//
// It never imports the official operator: it builds the official binaries at
// run time from the module in ./tools (a module of its own) and wraps them in
// OCI images with Tailplane's image builder (go run ./deploy/images layout),
// installs the official chart from the module's source with the Helm SDK, and
// talks to both operators only through the Kubernetes API, the tailnet (a
// `devcluster join` SOCKS5 proxy) and /proc.
//
// The pure parts (chart values, the compatibility table, statistics, reading
// /proc) are unit-tested without a cluster.
//
// It imports deploy/chart (the Helm SDK installer Tailplane's own chart
// uses), client-go, golang.org/x/net/proxy, golang.org/x/oauth2,
// sigs.k8s.io/yaml and charmbracelet/log; nothing of tailscale.com.
package official
