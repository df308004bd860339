package sdk

import (
	"bytes"
	"errors"
	"strings"
	"unsafe"

	"github.com/tailplane/tailplane/plugins/sdk/abi"
)

// A guest instance is single-threaded and serves one request at a time, so
// the handlers and the scratch buffer are plain package variables.
var (
	requestHandler  func(Request, Response) bool
	responseHandler func(Request, Response, bool)
	scratch         = make([]byte, 2048)
	recentStrs      recentStrings
	recentLsts      recentLists
)

// HandleRequest registers the request handler; call it from init. The
// handler returns true to pass the request on (to the route's backend, or
// the next plugin) and false when it answered through resp.
func HandleRequest(h func(req Request, resp Response) (next bool)) { requestHandler = h }

// HandleResponse registers a handler that runs after the next handler
// answered (middleware mode only; to change the response enable
// FeatureBufferResponse).
func HandleResponse(h func(req Request, resp Response, isError bool)) { responseHandler = h }

// dispatchRequest runs the registered handler for handle_request and
// returns ctx_next: 1 to pass the request on, 0 when the guest answered.
func dispatchRequest() uint64 {
	if requestHandler == nil || requestHandler(Request{}, Response{}) {
		return 1
	}
	return 0
}

// dispatchResponse runs the registered handler for handle_response.
func dispatchResponse(isError bool) {
	if responseHandler != nil {
		responseHandler(Request{}, Response{}, isError)
	}
}

// EnableFeatures turns on http-wasm features (abi.FeatureBufferRequest,
// FeatureBufferResponse, FeatureTrailers); from init it applies to every request.
func EnableFeatures(features uint32) uint32 { return enableFeatures(features) }

// Config returns the plugin's configuration bytes (JSON from the RoutingPlugin).
func Config() []byte {
	n := getConfig(ptr(scratch), uint32(len(scratch)))
	if int(n) > len(scratch) {
		scratch = make([]byte, n)
		n = getConfig(ptr(scratch), n)
	}
	return append([]byte(nil), scratch[:n]...)
}

// Log writes a message to the proxy's log at abi.LogDebug..LogError.
func Log(level int32, msg string) {
	if logEnabled(level) != 0 {
		hostLog(level, msg)
	}
}

func ptr(b []byte) unsafe.Pointer { return unsafe.Pointer(unsafe.SliceData(b)) }

// readString calls a (buf, limit) -> len host function, growing the scratch
// buffer when the value does not fit.
func readString(fn func(unsafe.Pointer, uint32) uint32) string {
	n := fn(ptr(scratch), uint32(len(scratch)))
	if int(n) > len(scratch) {
		scratch = make([]byte, n)
		n = fn(ptr(scratch), n)
	}
	return recentStrs.get(scratch[:n])
}

// readList calls a (buf, limit) -> count<<32|len host function and splits
// the NUL-terminated values.
func readList(fn func(unsafe.Pointer, uint32) uint64) []string {
	r := fn(ptr(scratch), uint32(len(scratch)))
	count, n := uint32(r>>32), uint32(r)
	if count == 0 {
		return nil
	}
	if int(n) > len(scratch) {
		scratch = make([]byte, n)
		r = fn(ptr(scratch), n)
		n = uint32(r)
	}
	return recentLsts.get(&recentStrs, scratch[:n])
}

// Request is the request being handled.
type Request struct{}

// Method returns the request method.
func (Request) Method() string { return readString(getMethod) }

// SetMethod changes the method sent to the backend.
func (Request) SetMethod(m string) { setMethod(m) }

// URI returns the request-target: path and query, encoded.
func (Request) URI() string { return readString(getURI) }

// Path returns the URI without its query.
func (r Request) Path() string {
	u := r.URI()
	if i := strings.IndexByte(u, '?'); i >= 0 {
		return u[:i]
	}
	return u
}

// SetURI rewrites the request-target (path and query, already encoded; it
// must start with /) that the backend receives. Routing (the route and its
// backends) was decided on the original path and does not change.
func (Request) SetURI(u string) { setURI(u) }

// Host returns the request's authority.
func (r Request) Host() string { return r.Header("Host") }

// Protocol returns e.g. "HTTP/1.1".
func (Request) Protocol() string { return readString(getProtocolVersion) }

// SourceAddr returns the client's address as the proxy saw it.
func (Request) SourceAddr() string { return readString(getSourceAddr) }

// Header returns the first value of the request header name.
func (Request) Header(name string) string { return firstHeaderValue(abi.HeaderRequest, name) }

// firstHeaderValue reads the values of name and keeps the first without
// splitting the list.
func firstHeaderValue(kind uint32, name string) string {
	r := getHeaderValues(kind, name, ptr(scratch), uint32(len(scratch)))
	if r>>32 == 0 {
		return ""
	}
	n := uint32(r)
	if int(n) > len(scratch) {
		scratch = make([]byte, n)
		n = uint32(getHeaderValues(kind, name, ptr(scratch), n))
	}
	b := scratch[:n]
	if i := bytes.IndexByte(b, 0); i >= 0 {
		b = b[:i]
	}
	return recentStrs.get(b)
}

// HeaderValues returns every value of the request header name. Do not
// modify the slice: the SDK may return it again (see Backends).
func (Request) HeaderValues(name string) []string { return headerValues(abi.HeaderRequest, name) }

// HeaderNames lists the request's header names. Do not modify the slice.
func (Request) HeaderNames() []string {
	return readList(func(b unsafe.Pointer, l uint32) uint64 { return getHeaderNames(abi.HeaderRequest, b, l) })
}

// SetHeader replaces the request header sent upstream.
func (Request) SetHeader(name, value string) { setHeaderValue(abi.HeaderRequest, name, value) }

// AddHeader adds a value to the request header sent upstream.
func (Request) AddHeader(name, value string) { addHeaderValue(abi.HeaderRequest, name, value) }

// RemoveHeader removes the request header sent upstream.
func (Request) RemoveHeader(name string) { removeHeader(abi.HeaderRequest, name) }

// Cookie returns the value of the named cookie, or "".
func (r Request) Cookie(name string) string {
	for _, line := range r.HeaderValues("Cookie") {
		for part := range strings.SplitSeq(line, ";") {
			k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
			if ok && k == name {
				return v
			}
		}
	}
	return ""
}

// Body reads the whole request body (middleware mode; empty when routing).
func (Request) Body() []byte { return readBodyAll(abi.BodyRequest) }

func headerValues(kind uint32, name string) []string {
	return readList(func(b unsafe.Pointer, l uint32) uint64 { return getHeaderValues(kind, name, b, l) })
}

func readBodyAll(kind uint32) []byte {
	var out []byte
	for {
		r := readBody(kind, ptr(scratch), uint32(len(scratch)))
		out = append(out, scratch[:uint32(r)]...)
		if r>>32 == 1 {
			return out
		}
	}
}

// Response is the response the plugin may write instead of passing on.
type Response struct{}

// Status returns the response status (200 unless set).
func (Response) Status() int { return int(getStatusCode()) }

// SetStatus sets the response status.
func (Response) SetStatus(code int) { setStatusCode(uint32(code)) }

// Header returns the first value of the response header name.
func (Response) Header(name string) string { return firstHeaderValue(abi.HeaderResponse, name) }

// SetHeader sets a response header.
func (Response) SetHeader(name, value string) { setHeaderValue(abi.HeaderResponse, name, value) }

// AddHeader adds a response header value.
func (Response) AddHeader(name, value string) { addHeaderValue(abi.HeaderResponse, name, value) }

// RemoveHeader removes a response header.
func (Response) RemoveHeader(name string) { removeHeader(abi.HeaderResponse, name) }

// Write appends to the response body.
func (Response) Write(b []byte) {
	if len(b) > 0 {
		writeBody(abi.BodyResponse, ptr(b), uint32(len(b)))
	}
}

// Body reads the upstream's buffered response body (FeatureBufferResponse,
// in HandleResponse).
func (Response) Body() []byte { return readBodyAll(abi.BodyResponse) }

// Redirect answers status (301, 302, 303, 307 or 308) with Location; it
// returns false so a handler can `return resp.Redirect(...)`.
func (r Response) Redirect(status int, location string) bool {
	r.SetHeader("Location", location)
	r.SetStatus(status)
	return false
}

// Deny answers the request itself with status and a short body (at most
// 1 MiB); the backend is not called. It returns false, so a handler can
// `return resp.Deny(...)`. 2xx, 4xx and 5xx statuses are sent as given
// (Deny(200, "ok") answers a health check); any other status is sent as
// 403. Answer 3xx with Redirect: a 3xx without Location fails the plugin.
func (r Response) Deny(status int, body string) bool {
	r.SetStatus(status)
	r.Write([]byte(body))
	return false
}

// ErrNotAllowed is returned when the host refuses a routing request.
var ErrNotAllowed = errors.New("not allowed by the host")

// RouteHost returns the host of the matched route rule (capability route).
func RouteHost() string { return readString(getRouteHost) }

// RoutePath returns the path of the matched route rule (capability route).
func RoutePath() string { return readString(getRoutePath) }

// Backends lists the backends the route offers, the route's own first,
// then the Ingress's extra backends (annotation tailplane.dev/extra-backends).
// Names are "<namespace>/<service>:<port>" (capability route). Do not
// modify the slice: a later call that finds the same list returns it again,
// which saves an allocation per request (copy it with slices.Clone to
// change it; append already copies).
func Backends() []string { return readList(getBackends) }

// SetBackend sends the request to the named backend: a name Backends
// returns, or its short form "<service>:<port>" (the Service in the route's
// namespace, the port's number). ErrNotAllowed if the route does not offer
// it (capability route).
func SetBackend(name string) error {
	if setBackend(name) != abi.StatusOK {
		return ErrNotAllowed
	}
	return nil
}

// Login returns the caller's tailnet login name, "" on Funnel (capability identity).
func Login() string { return readString(getLogin) }

// Node returns the caller's device name (capability identity).
func Node() string { return readString(getNode) }

// Tags returns the caller device's ACL tags (capability identity). Do not
// modify the slice (see Backends).
func Tags() []string { return readList(getTags) }

// Public reports whether the request came through Funnel (capability funnel).
func Public() bool { return isPublic() != 0 }

// DenyPublic refuses this request if it came through Funnel (capability funnel).
func DenyPublic() { setFunnel(abi.FunnelDeny) }

// AllowPublic asks to widen Funnel exposure. The host never allows it and
// returns ErrNotAllowed; it exists so the refusal is explicit and testable.
func AllowPublic() error {
	if setFunnel(abi.FunnelAllow) != abi.StatusOK {
		return ErrNotAllowed
	}
	return nil
}
