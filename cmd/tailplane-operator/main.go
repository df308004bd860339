// Command tailplane-operator runs Tailplane's operator: the handler modules
// of handlers/ on the runtime of runtime/.
//
// It is a thin main: no arguments but --help and --version (usage.go),
// settings from the environment (docs/operator.md lists them), a startup check of the tailnet credentials that fails fast with one
// line, then the runtime with leader election, whose leader first brings up
// the operator's own tailnet device (tsnet, state in a Secret) and then
// handles objects.
package main

import (
	"context"
	"fmt"
	"io"
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

	"github.com/tailplane/tailplane/internal/cmdline"
)

func main() {
	// Process-wide tailscale switches: the device reports itself as the
	// operator, as the official one does, and never uploads tailscaled's
	// logs to Tailscale's log service (they go to our logger instead).
	hostinfo.SetApp(kubetypes.AppOperator)
	envknob.SetNoLogsNoSupport()
	logtail.Disable()
	os.Exit(mainExit(os.Args[1:], os.Getenv, os.Stdout, os.Stderr))
}

// mainExit is main's logic: the command line (only --help and --version:
// `kubectl exec` with a flag must not start a second operator), then run
// until SIGTERM or SIGINT. It returns the exit status.
func mainExit(args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	if code, done := cmdline.Check(usage, args, stdout, stderr); done {
		return code
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, getenv, stderr); err != nil {
		fmt.Fprintln(stderr, "tailplane-operator:", err)
		return 1
	}
	return 0
}
