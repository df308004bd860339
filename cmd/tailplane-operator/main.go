// Command tailplane-operator runs Tailplane's operator: the handler modules
// of handlers/ on the runtime of runtime/.
//
// It is a thin main: settings from the environment (docs/operator.md lists
// them), a startup check of the tailnet credentials that fails fast with one
// line, then the runtime with leader election, whose leader first brings up
// the operator's own tailnet device (tsnet, state in a Secret) and then
// handles objects.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	// Mozilla's roots, used only where the system has none (the images are
	// FROM scratch): TLS to control, the tailnet API and ACME verifies anyway.
	_ "golang.org/x/crypto/x509roots/fallback"
	"tailscale.com/envknob"
	"tailscale.com/hostinfo"
	"tailscale.com/kube/kubetypes"
	"tailscale.com/logtail"
)

func main() {
	// Process-wide tailscale switches: the device reports itself as the
	// operator, as the official one does, and never uploads tailscaled's
	// logs to Tailscale's log service (they go to our logger instead).
	hostinfo.SetApp(kubetypes.AppOperator)
	envknob.SetNoLogsNoSupport()
	logtail.Disable()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Getenv, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "tailplane-operator:", err)
		os.Exit(1)
	}
}
