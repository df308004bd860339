// Command misbehave is a test guest whose behaviour depends on the path:
// /loop spins forever, /alloc grows memory without bound, /trap10 panics on
// every 10th call of an instance, /panic panics on every call, /backend?to=NAME calls set_backend,
// /widen asks to widen Funnel, /ambient reports what WASI lets it see. Results go into request headers.
package main

import (
	"net"
	"os"
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
		case uri == "/panic":
			panic("the guest gives up on " + uri)
		case strings.HasPrefix(uri, "/backend?to="):
			result := "ok"
			if err := sdk.SetBackend(strings.TrimPrefix(uri, "/backend?to=")); err != nil {
				result = "refused"
			}
			req.SetHeader("X-Backend-Result", result)
		case uri == "/ambient":
			// What WASI exposes: only declared env, no files, no sockets.
			req.SetHeader("X-Env-Greeting", os.Getenv("GREETING"))
			req.SetHeader("X-Env-Home", os.Getenv("HOME"))
			_, ferr := os.ReadFile("/etc/hostname")
			req.SetHeader("X-File", errText(ferr))
			_, derr := os.ReadDir("/")
			req.SetHeader("X-Dir", errText(derr))
			_, nerr := net.Dial("tcp", "127.0.0.1:80")
			req.SetHeader("X-Net", errText(nerr))
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

func errText(err error) string {
	if err == nil {
		return "ok"
	}
	return "error"
}

func main() {}
