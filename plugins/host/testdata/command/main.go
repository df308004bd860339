// Command command is an http-wasm guest built the wrong way: as a WASI
// command (no -buildmode=c-shared), so instantiating it runs main and
// exits. Loading it must fail with a message saying how to build it.
package main

import "github.com/tailplane/tailplane/plugins/sdk"

func main() {
	sdk.HandleRequest(func(sdk.Request, sdk.Response) bool { return true })
}
