// Command tailplane-proxy runs one tsnet-backed proxy whose role (L7 ingress,
// L4 ingress, egress, connector) comes from its config.
//
// It is a thin main: settings from the environment (see settings.go), then
// proxy.Engine.Run until SIGTERM or SIGINT, which start a graceful drain.
//
// `tailplane-proxy nameserver` runs the DNSConfig nameserver instead (see
// nameserver.go): the same image, so a DNSConfig needs no image of its own.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/charmbracelet/log"
	// Mozilla's roots, used only where the system has none (the images are
	// FROM scratch): TLS to control, the tailnet API and ACME verifies anyway.
	_ "golang.org/x/crypto/x509roots/fallback"
	"tailscale.com/envknob"
	"tailscale.com/logtail"

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
	logger := log.NewWithOptions(os.Stderr, log.Options{ReportTimestamp: true, Prefix: "tailplane-proxy"})
	if len(os.Args) > 1 && os.Args[1] == "nameserver" {
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
		err := runNameserver(ctx, os.Args[2:], logger.WithPrefix("nameserver"))
		stop()
		if err != nil {
			logger.Error("nameserver stopped", "err", err)
			os.Exit(1)
		}
		return
	}
	if err := run(logger); err != nil {
		logger.Error("cannot start", "err", err)
		os.Exit(1)
	}
}

func run(logger *log.Logger) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	opts, err := optionsFromEnv(ctx, os.Getenv, logger)
	if err != nil {
		return err
	}
	engine, err := proxy.New(opts)
	if err != nil {
		return err
	}
	return engine.Run(ctx)
}
