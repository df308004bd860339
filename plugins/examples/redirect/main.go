// Command redirect is a plain http-wasm plugin (no Tailplane capability):
// it answers redirects from rules in its config, with regex captures.
//
// Config (JSON): {"rules":[{"match":"^/old/(.*)$","to":"/new/$1","status":308}]}.
// The first rule whose regular expression matches the path wins; the query
// string is kept; status defaults to 302.
package main

import (
	"encoding/json"
	"regexp"
	"strings"

	"github.com/tailplane/tailplane/plugins/sdk"
)

type rule struct {
	Match  string `json:"match"`
	To     string `json:"to"`
	Status int    `json:"status"`
	re     *regexp.Regexp
}

func init() {
	var cfg struct {
		Rules []rule `json:"rules"`
	}
	if err := json.Unmarshal(sdk.Config(), &cfg); err != nil {
		panic("redirect: bad config: " + err.Error())
	}
	for i := range cfg.Rules {
		cfg.Rules[i].re = regexp.MustCompile(cfg.Rules[i].Match)
		if cfg.Rules[i].Status == 0 {
			cfg.Rules[i].Status = 302
		}
	}
	sdk.HandleRequest(func(req sdk.Request, resp sdk.Response) bool {
		uri := req.URI()
		path, query, _ := strings.Cut(uri, "?")
		for _, r := range cfg.Rules {
			m := r.re.FindStringSubmatchIndex(path)
			if m == nil {
				continue
			}
			to := string(r.re.ExpandString(nil, r.To, path, m))
			if query != "" {
				to += "?" + query
			}
			return resp.Redirect(r.Status, to)
		}
		return true
	})
}

func main() {}
