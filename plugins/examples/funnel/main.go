// Command funnel is a routing plugin that lets requests from the public
// internet (Funnel) reach only the listed path prefixes; tailnet requests
// are untouched. It needs the "funnel" capability and can only narrow what
// the route exposes.
//
// Config (JSON): {"publicPaths":["/public/","/healthz"]}.
package main

import (
	"encoding/json"
	"strings"

	"github.com/tailplane/tailplane/plugins/sdk"
)

func init() {
	var cfg struct {
		PublicPaths []string `json:"publicPaths"`
	}
	if err := json.Unmarshal(sdk.Config(), &cfg); err != nil {
		panic("funnel: bad config: " + err.Error())
	}
	sdk.HandleRequest(func(req sdk.Request, resp sdk.Response) bool {
		if !sdk.Public() {
			return true
		}
		path := req.Path()
		for _, p := range cfg.PublicPaths {
			if strings.HasPrefix(path, p) {
				return true
			}
		}
		sdk.DenyPublic()
		return true
	})
}

func main() {}
