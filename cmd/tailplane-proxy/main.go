// Command tailplane-proxy runs one tsnet-backed proxy whose role (L7 ingress,
// L4 ingress, egress) comes from its config.
//
// It is a thin main: settings from the environment (see settings.go), then
// proxy.Engine.Run until SIGTERM or SIGINT, which start a graceful drain.
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

	"github.com/tailplane/tailplane/proxy"
)

func main() {
	logger := log.NewWithOptions(os.Stderr, log.Options{ReportTimestamp: true, Prefix: "tailplane-proxy"})
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
