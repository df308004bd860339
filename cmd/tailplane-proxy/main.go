// Command tailplane-proxy runs one tsnet-backed proxy whose role (L7 ingress,
// L4 ingress, egress, connector) comes from its config.
//
// It is a thin main: settings from the environment, then proxy.Run.
package main

import (
	"os"

	"github.com/charmbracelet/log"
)

func main() {
	logger := log.NewWithOptions(os.Stderr, log.Options{ReportTimestamp: true, Prefix: "tailplane-proxy"})
	logger.Error("the proxy is not built yet; see the open issues")
	os.Exit(1)
}
