// Command middleware is a test guest for the full http-wasm semantics:
// it buffers the request and response, reports the request body's length
// upstream, and in handle_response upper-cases the upstream's body.
package main

import (
	"bytes"
	"strconv"

	"github.com/tailplane/tailplane/plugins/sdk"
	"github.com/tailplane/tailplane/plugins/sdk/abi"
)

func init() {
	sdk.EnableFeatures(abi.FeatureBufferRequest | abi.FeatureBufferResponse)
	sdk.HandleRequest(func(req sdk.Request, resp sdk.Response) bool {
		if req.Path() == "/local" {
			resp.SetHeader("Content-Type", "text/plain")
			return resp.Deny(418, "short and stout\n")
		}
		req.SetHeader("X-Body-Len", strconv.Itoa(len(req.Body())))
		return true
	})
	sdk.HandleResponse(func(req sdk.Request, resp sdk.Response, isError bool) {
		body := resp.Body()
		resp.SetHeader("X-Upstream-Status", strconv.Itoa(resp.Status()))
		resp.SetStatus(203)
		resp.Write(bytes.ToUpper(body))
	})
}

func main() {}
