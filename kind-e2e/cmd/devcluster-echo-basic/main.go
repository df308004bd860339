// Command devcluster-echo-basic stands in for the Gateway API conformance
// suite's echo-basic image (and the base manifests' CoreDNS) on devcluster:
// the conformance runner (kind-e2e/gatewayconformance) builds it into images
// named as the suite's manifests name theirs, so that the manifests run
// unmodified on the real node without a registry. What it serves, chosen by
// environment as echo-basic chooses, is internal/echobasic's doc.
//
// It imports internal/echobasic and charmbracelet/log. It stops on SIGTERM.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/charmbracelet/log"

	"github.com/tailplane/tailplane/kind-e2e/internal/echobasic"
)

func main() {
	logger := log.NewWithOptions(os.Stderr, log.Options{ReportTimestamp: true, Prefix: "echo-basic"})
	if os.Getenv("ECHO_DEBUG") != "" {
		logger.SetLevel(log.DebugLevel)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	cfg, err := echobasic.FromEnv(os.Getenv, os.Args[1:])
	if err != nil {
		logger.Fatal("configure", "err", err)
	}
	servers, err := echobasic.Start(ctx, cfg, logger)
	if err != nil {
		logger.Fatal("start", "err", err)
	}
	if err := servers.Wait(ctx); err != nil {
		logger.Fatal("serve", "err", err)
	}
}
