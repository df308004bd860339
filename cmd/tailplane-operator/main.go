// Command tailplane-operator runs Tailplane's operator: the handler modules
// of handlers/ on the runtime of runtime/.
//
// It is a thin main: settings from the environment (docs/operator.md lists
// them), a startup check of the tailnet credentials that fails fast with one
// line, then the runtime with leader election.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Getenv, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "tailplane-operator:", err)
		os.Exit(1)
	}
}
