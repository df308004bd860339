// Command parts is the canary decision taken apart, for
// BenchmarkDecisionParts: its config lists the steps it takes per request,
// so that one module measures each step's cost.
//
// Config (JSON): {"steps":["header","backends","set"]}: "header" reads
// X-Canary, "backends" lists the route's backends, "set" picks the second
// one; no steps is an empty handler (the cost of calling into the guest).
package main

import (
	"encoding/json"
	"slices"

	"github.com/tailplane/tailplane/plugins/sdk"
)

func init() {
	var cfg struct{ Steps []string }
	if err := json.Unmarshal(sdk.Config(), &cfg); err != nil {
		panic("parts: bad config: " + err.Error())
	}
	header, backends, set := slices.Contains(cfg.Steps, "header"), slices.Contains(cfg.Steps, "backends"), slices.Contains(cfg.Steps, "set")
	var matched int
	sdk.HandleRequest(func(req sdk.Request, resp sdk.Response) bool {
		if header && req.Header("X-Canary") == "always" {
			matched++
		}
		backend := "web-canary:80" // the second backend of the benchmark's route
		if backends {
			if b := sdk.Backends(); len(b) > 1 {
				backend = b[1]
			}
		}
		if set {
			_ = sdk.SetBackend(backend)
		}
		return true
	})
}

func main() {}
