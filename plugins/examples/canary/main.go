// Command canary is a routing plugin: requests carrying a header or cookie
// value go to the canary backend, all others to the route's default. It
// needs the "route" capability.
//
// Config (JSON): {"header":"X-Canary","headerValue":"always",
// "cookie":"canary","cookieValue":"1","backend":"web-canary:80"}. Backend
// is a backend the route offers ("<namespace>/<service>:<port>", or
// "<service>:<port>" in the route's namespace; an Ingress offers more than
// its own with the annotation tailplane.dev/extra-backends) and defaults to
// the route's second backend.
package main

import (
	"encoding/json"

	"github.com/tailplane/tailplane/plugins/sdk"
)

type config struct {
	Header      string `json:"header"`
	HeaderValue string `json:"headerValue"`
	Cookie      string `json:"cookie"`
	CookieValue string `json:"cookieValue"`
	Backend     string `json:"backend"`
}

func init() {
	var cfg config
	if err := json.Unmarshal(sdk.Config(), &cfg); err != nil {
		panic("canary: bad config: " + err.Error())
	}
	sdk.HandleRequest(func(req sdk.Request, resp sdk.Response) bool {
		canary := (cfg.Header != "" && req.Header(cfg.Header) == cfg.HeaderValue) ||
			(cfg.Cookie != "" && req.Cookie(cfg.Cookie) == cfg.CookieValue)
		if !canary {
			return true
		}
		backend := cfg.Backend
		if backend == "" {
			if b := sdk.Backends(); len(b) > 1 {
				backend = b[1]
			}
		}
		if backend != "" {
			if err := sdk.SetBackend(backend); err != nil {
				sdk.Log(2, "canary backend "+backend+" is not allowed on this route")
			}
		}
		return true
	})
}

func main() {}
