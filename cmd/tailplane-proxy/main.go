// Command tailplane-proxy runs one tsnet-backed proxy whose role (L7 ingress,
// L4 ingress, egress, connector) comes from its config.
//
// It is a thin main: no arguments but --help and --version (usage.go),
// settings from the environment (see settings.go), then proxy.Engine.Run
// until SIGTERM or SIGINT, which start a graceful drain.
//
// `tailplane-proxy nameserver` runs the DNSConfig nameserver instead (see
// nameserver.go): the same image, so a DNSConfig needs no image of its own.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/charmbracelet/log"
	// Mozilla's roots, used only where the system has none (the images are
	// FROM scratch): TLS to control, the tailnet API and ACME verifies anyway.
	_ "golang.org/x/crypto/x509roots/fallback"
	"tailscale.com/envknob"
	"tailscale.com/logtail"

	"github.com/tailplane/tailplane/internal/cmdline"
	"github.com/tailplane/tailplane/internal/tslog"
	"github.com/tailplane/tailplane/proxy"
)

func main() {
	// Process-wide tailscale switches: never upload tailscaled's logs to
	// Tailscale's log service (they go to our logger). Uploading them made
	// a proxy on a tailnet without Internet access look up log.tailscale.com
	// every few seconds and, when that failed, ask the built-in public DERP
	// servers (derp*.tailscale.com) for it; a proxy must contact only its
	// login server, the DERP servers of its netmap and its targets.
	envknob.SetNoLogsNoSupport()
	logtail.Disable()
	os.Exit(mainExit(os.Args[1:], os.Getenv, os.Stdout, os.Stderr))
}

// mainExit is main's logic: the command line (`kubectl exec` with a flag
// must not start a second proxy in the pod), then the proxy or the
// nameserver until SIGTERM or SIGINT. It returns the exit status.
func mainExit(args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	nameserver := len(args) > 0 && args[0] == "nameserver"
	if !nameserver {
		if code, done := cmdline.Check(usage, args, stdout, stderr); done {
			return code
		}
	}
	ls, err := tslog.FromEnv(getenv)
	if err != nil {
		fmt.Fprintln(stderr, "tailplane-proxy: cannot start:", err)
		return 1
	}
	logger := tslog.New(stderr, ls.JSON).WithPrefix("tailplane-proxy")
	// klog's logger is process-wide: client-go's informers log through it.
	tslog.RouteKlog(logger)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if nameserver {
		err := runNameserver(ctx, args[1:], stdout, logger.WithPrefix("nameserver"))
		var bad badArgs
		switch {
		case errors.Is(err, flag.ErrHelp):
			return cmdline.ExitOK
		case errors.As(err, &bad):
			fmt.Fprintln(stderr, "tailplane-proxy nameserver:", bad.error)
			return cmdline.ExitUsage
		case err != nil:
			logger.Error("nameserver stopped", "err", err)
			return 1
		}
		return 0
	}
	if err := run(ctx, getenv, logger, ls); err != nil {
		logger.Error("cannot start", "err", err)
		return 1
	}
	return 0
}

func run(ctx context.Context, getenv func(string) string, logger *log.Logger, ls tslog.Settings) error {
	opts, err := optionsFromEnv(ctx, getenv, logger)
	if err != nil {
		return err
	}
	opts.TsnetDebug = ls.TsnetDebug
	engine, err := proxy.New(opts)
	if err != nil {
		return err
	}
	return engine.Run(ctx)
}
