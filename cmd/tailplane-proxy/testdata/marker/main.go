// Command marker is a test guest that marks every response with the
// X-Plugin-Version header. The swap tests build it twice with
// -ldflags=-X main.version=..., so the two modules differ only in that
// string: two digests, the same code.
package main

import "github.com/tailplane/tailplane/plugins/sdk"

var version = "dev"

func init() {
	sdk.HandleRequest(func(_ sdk.Request, resp sdk.Response) bool {
		resp.SetHeader("X-Plugin-Version", version)
		return true
	})
}

func main() {}
