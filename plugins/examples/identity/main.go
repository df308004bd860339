// Command identity is a routing plugin that allows or denies requests by
// the caller's tailnet identity per path prefix. It needs the "identity"
// capability.
//
// Config (JSON): {"rules":[{"path":"/admin/","logins":["alice@example.com"],
// "tags":["tag:ops"]}]}. The longest matching prefix decides; a caller
// passes when its login or one of its tags is listed. Paths no rule covers
// are allowed. Funnel callers have no identity and are denied on covered paths.
package main

import (
	"encoding/json"
	"slices"
	"strings"

	"github.com/tailplane/tailplane/plugins/sdk"
)

type rule struct {
	Path   string   `json:"path"`
	Logins []string `json:"logins"`
	Tags   []string `json:"tags"`
}

func init() {
	var cfg struct {
		Rules []rule `json:"rules"`
	}
	if err := json.Unmarshal(sdk.Config(), &cfg); err != nil {
		panic("identity: bad config: " + err.Error())
	}
	sdk.HandleRequest(func(req sdk.Request, resp sdk.Response) bool {
		path := req.Path()
		var best *rule
		for i, r := range cfg.Rules {
			if strings.HasPrefix(path, r.Path) && (best == nil || len(r.Path) > len(best.Path)) {
				best = &cfg.Rules[i]
			}
		}
		if best == nil {
			return true
		}
		if login := sdk.Login(); login != "" && slices.Contains(best.Logins, login) {
			return true
		}
		for _, t := range sdk.Tags() {
			if slices.Contains(best.Tags, t) {
				return true
			}
		}
		return resp.Deny(403, "forbidden\n")
	})
}

func main() {}
