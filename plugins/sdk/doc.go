// Package sdk is the guest side of Tailplane routing plugins for plain Go
// (no TinyGo): register a handler in init and build with
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o plugin.wasm .
//
// A plugin is a few lines:
//
//	func init() {
//		sdk.HandleRequest(func(req sdk.Request, resp sdk.Response) bool {
//			if strings.HasPrefix(req.Path(), "/old/") {
//				return resp.Redirect(308, "/new/"+strings.TrimPrefix(req.Path(), "/old/"))
//			}
//			return true // pass on to the route's backend
//		})
//	}
//	func main() {}
//
// The package implements the guest side of the http-wasm http_handler ABI
// (it exports handle_request and handle_response) and wraps Tailplane's
// tailplane_route_v1 module: Backends/SetBackend, Login/Node/Tags, Public
// and DenyPublic. Routing functions need the matching capability in the
// plugin's config (route, identity, funnel), or the host refuses to load the
// plugin.
//
// Off wasip1 (go vet, unit tests) the package compiles with host functions
// that panic, so plugin code type-checks everywhere.
//
// The SDK is a module of its own (github.com/tailplane/tailplane/plugins/sdk,
// with the ABI constants in its abi package): a plugin's go.mod needs only
// `go get github.com/tailplane/tailplane/plugins/sdk`, and the SDK needs
// only the standard library. docs/plugins.md is the guide.
package sdk
