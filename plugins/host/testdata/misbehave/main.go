// Command misbehave is a test guest whose behaviour depends on the path:
// /loop spins forever, /alloc grows memory without bound, /trap10 panics on
// every 10th call of an instance, /backend?to=NAME calls set_backend,
// /widen asks to widen Funnel. Results go into request headers.
package main

import (
	"strings"

	"github.com/tailplane/tailplane/plugins/sdk"
)

var (
	calls int
	hoard [][]byte
)

func init() {
	sdk.HandleRequest(func(req sdk.Request, resp sdk.Response) bool {
		calls++
		uri := req.URI()
		switch {
		case uri == "/loop":
			for {
				calls++
			}
		case uri == "/alloc":
			for {
				hoard = append(hoard, make([]byte, 1<<20))
			}
		case uri == "/trap10":
			if calls%10 == 0 {
				panic("every tenth call traps")
			}
		case strings.HasPrefix(uri, "/backend?to="):
			result := "ok"
			if err := sdk.SetBackend(strings.TrimPrefix(uri, "/backend?to=")); err != nil {
				result = "refused"
			}
			req.SetHeader("X-Backend-Result", result)
		case uri == "/widen":
			result := "ok"
			if err := sdk.AllowPublic(); err != nil {
				result = "refused"
			}
			req.SetHeader("X-Widen-Result", result)
		}
		req.SetHeader("X-Plugin", "seen")
		return true
	})
}

func main() {}
