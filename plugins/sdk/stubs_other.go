//go:build !wasip1

package sdk

import "unsafe"

// Off wasip1 there is no host: these stand-ins let plugin code compile and
// be vetted, and panic if called.

// The wasip1 exports call these; referenced here so vet and staticcheck see
// them used on every platform.
var _, _ = dispatchRequest, dispatchResponse

func noHost() { panic("sdk: host functions exist only in a wasip1 build") }

func enableFeatures(uint32) uint32                                  { noHost(); return 0 }
func getConfig(unsafe.Pointer, uint32) uint32                       { noHost(); return 0 }
func hostLog(int32, string)                                         { noHost() }
func logEnabled(int32) uint32                                       { noHost(); return 0 }
func getMethod(unsafe.Pointer, uint32) uint32                       { noHost(); return 0 }
func setMethod(string)                                              { noHost() }
func getURI(unsafe.Pointer, uint32) uint32                          { noHost(); return 0 }
func setURI(string)                                                 { noHost() }
func getProtocolVersion(unsafe.Pointer, uint32) uint32              { noHost(); return 0 }
func getSourceAddr(unsafe.Pointer, uint32) uint32                   { noHost(); return 0 }
func getHeaderNames(uint32, unsafe.Pointer, uint32) uint64          { noHost(); return 0 }
func getHeaderValues(uint32, string, unsafe.Pointer, uint32) uint64 { noHost(); return 0 }
func setHeaderValue(uint32, string, string)                         { noHost() }
func addHeaderValue(uint32, string, string)                         { noHost() }
func removeHeader(uint32, string)                                   { noHost() }
func readBody(uint32, unsafe.Pointer, uint32) uint64                { noHost(); return 0 }
func writeBody(uint32, unsafe.Pointer, uint32)                      { noHost() }
func getStatusCode() uint32                                         { noHost(); return 0 }
func setStatusCode(uint32)                                          { noHost() }
func getRouteHost(unsafe.Pointer, uint32) uint32                    { noHost(); return 0 }
func getRoutePath(unsafe.Pointer, uint32) uint32                    { noHost(); return 0 }
func getBackends(unsafe.Pointer, uint32) uint64                     { noHost(); return 0 }
func setBackend(string) int32                                       { noHost(); return 0 }
func getLogin(unsafe.Pointer, uint32) uint32                        { noHost(); return 0 }
func getNode(unsafe.Pointer, uint32) uint32                         { noHost(); return 0 }
func getTags(unsafe.Pointer, uint32) uint64                         { noHost(); return 0 }
func isPublic() uint32                                              { noHost(); return 0 }
func setFunnel(int32) int32                                         { noHost(); return 0 }
