//go:build wasip1

package sdk

import "unsafe"

// The routing module's functions are imported only by plugins that call
// them: Go drops unused wasmimports, so a plain http-wasm plugin built with
// this SDK needs no capability.

//go:wasmimport tailplane_route_v1 get_route_host
func getRouteHost(buf unsafe.Pointer, limit uint32) uint32

//go:wasmimport tailplane_route_v1 get_route_path
func getRoutePath(buf unsafe.Pointer, limit uint32) uint32

//go:wasmimport tailplane_route_v1 get_backends
func getBackends(buf unsafe.Pointer, limit uint32) uint64

//go:wasmimport tailplane_route_v1 set_backend
func setBackend(name string) int32

//go:wasmimport tailplane_route_v1 get_login
func getLogin(buf unsafe.Pointer, limit uint32) uint32

//go:wasmimport tailplane_route_v1 get_node
func getNode(buf unsafe.Pointer, limit uint32) uint32

//go:wasmimport tailplane_route_v1 get_tags
func getTags(buf unsafe.Pointer, limit uint32) uint64

//go:wasmimport tailplane_route_v1 is_public
func isPublic() uint32

//go:wasmimport tailplane_route_v1 set_funnel
func setFunnel(verdict int32) int32
