//go:build wasip1

package sdk

import "unsafe"

//go:wasmimport http_handler enable_features
func enableFeatures(features uint32) uint32

//go:wasmimport http_handler get_config
func getConfig(buf unsafe.Pointer, limit uint32) uint32

//go:wasmimport http_handler log
func hostLog(level int32, msg string)

//go:wasmimport http_handler log_enabled
func logEnabled(level int32) uint32

//go:wasmimport http_handler get_method
func getMethod(buf unsafe.Pointer, limit uint32) uint32

//go:wasmimport http_handler set_method
func setMethod(method string)

//go:wasmimport http_handler get_uri
func getURI(buf unsafe.Pointer, limit uint32) uint32

//go:wasmimport http_handler set_uri
func setURI(uri string)

//go:wasmimport http_handler get_protocol_version
func getProtocolVersion(buf unsafe.Pointer, limit uint32) uint32

//go:wasmimport http_handler get_source_addr
func getSourceAddr(buf unsafe.Pointer, limit uint32) uint32

//go:wasmimport http_handler get_header_names
func getHeaderNames(kind uint32, buf unsafe.Pointer, limit uint32) uint64

//go:wasmimport http_handler get_header_values
func getHeaderValues(kind uint32, name string, buf unsafe.Pointer, limit uint32) uint64

//go:wasmimport http_handler set_header_value
func setHeaderValue(kind uint32, name, value string)

//go:wasmimport http_handler add_header_value
func addHeaderValue(kind uint32, name, value string)

//go:wasmimport http_handler remove_header
func removeHeader(kind uint32, name string)

//go:wasmimport http_handler read_body
func readBody(kind uint32, buf unsafe.Pointer, limit uint32) uint64

//go:wasmimport http_handler write_body
func writeBody(kind uint32, body unsafe.Pointer, length uint32)

//go:wasmimport http_handler get_status_code
func getStatusCode() uint32

//go:wasmimport http_handler set_status_code
func setStatusCode(code uint32)

//go:wasmexport handle_request
func handleRequest() uint64 { return dispatchRequest() }

//go:wasmexport handle_response
func handleResponse(reqCtx uint32, isError uint32) { dispatchResponse(isError != 0) }
