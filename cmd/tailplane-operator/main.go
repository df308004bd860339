// Command tailplane-operator runs Tailplane's operator: the handler modules
// of handlers/ on the runtime of runtime/.
//
// It is a thin main: settings from the environment, then wiring.
package main

import (
	"os"

	"github.com/charmbracelet/log"
)

func main() {
	logger := log.NewWithOptions(os.Stderr, log.Options{ReportTimestamp: true, Prefix: "tailplane-operator"})
	logger.Error("the operator's handlers are not built yet; see the open issues")
	os.Exit(1)
}
