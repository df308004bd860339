// Command abiv2 is a test guest built for a routing module version this
// host does not have: loading it must fail with a clear ABI error.
package main

import "github.com/tailplane/tailplane/plugins/sdk"

//go:wasmimport tailplane_route_v2 abi_version
func abiVersion() int32

func init() {
	sdk.HandleRequest(func(sdk.Request, sdk.Response) bool { return abiVersion() == 2 })
}

func main() {}
