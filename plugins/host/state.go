package host

import (
	"bytes"
	"io"
	"net/http"
	"strings"

	"github.com/tailplane/tailplane/proxy/route"
)

// maxResponseBody caps what a guest may write as a response body (the
// Decision body in routing mode, the buffered body in middleware mode).
const maxResponseBody = 1 << 20

// exchange is the state of one request while a guest handles it: the
// request as the guest sees and edits it, the response it builds, and the
// routing verdicts. Host functions reach it through the call's context.
type exchange struct {
	plugin *Plugin
	inst   *instance
	inInit bool

	method, uri, host   string
	proto, sourceAddr   string
	reqHeader           http.Header
	reqHeaderOwned      bool
	reqTrailer          http.Header
	editedReq           map[string]struct{}
	uriChanged          bool
	methodChanged       bool
	reqBody             io.Reader // nil in routing mode
	reqBodyBuf          []byte    // what was read, replayed to the next handler
	reqBodyEOF          bool
	reqBodyConsumed     int
	reqBodyRewritten    bool
	features            uint32
	afterNext           bool
	status              int
	respHeader          http.Header
	respTrailer         http.Header
	respBody            bytes.Buffer
	respBodyRewritten   bool
	respWritable        bool // false once the response went to the client
	respBodyOffset      int
	route               *route.Route
	identity            *route.Identity
	public              bool
	backend             *route.Backend
	denyPublic          bool
	backendRejected     bool
	funnelWidenRejected bool
}

func (x *exchange) headers(kind uint32) http.Header {
	switch kind {
	case 0:
		return x.reqHeader
	case 1:
		return x.respHeader
	case 2:
		return x.reqTrailer
	case 3:
		return x.respTrailer
	}
	return nil
}

// mutableHeaders returns the header map of kind for writing, copying the
// request headers first (they belong to the proxy) and noting the edit.
func (x *exchange) mutableHeaders(kind uint32, name string) http.Header {
	switch kind {
	case 0:
		if !x.reqHeaderOwned {
			x.reqHeader = x.reqHeader.Clone()
			if x.reqHeader == nil {
				x.reqHeader = http.Header{}
			}
			x.reqHeaderOwned = true
		}
		if x.editedReq == nil {
			x.editedReq = map[string]struct{}{}
		}
		x.editedReq[http.CanonicalHeaderKey(name)] = struct{}{}
		return x.reqHeader
	case 1:
		if !x.respWritable {
			return nil
		}
		if x.respHeader == nil {
			x.respHeader = http.Header{}
		}
		return x.respHeader
	case 2:
		if x.reqTrailer == nil {
			x.reqTrailer = http.Header{}
		}
		return x.reqTrailer
	case 3:
		if !x.respWritable {
			return nil
		}
		if x.respTrailer == nil {
			x.respTrailer = http.Header{}
		}
		return x.respTrailer
	}
	return nil
}

// headerValues returns the values of name; Host is the request's authority.
func (x *exchange) headerValues(kind uint32, name string) []string {
	if kind == 0 && strings.EqualFold(name, "host") {
		if x.host == "" {
			return nil
		}
		return []string{x.host}
	}
	return x.headers(kind).Values(name)
}

// headerNames lists the names present; the request's list includes Host.
func (x *exchange) headerNames(kind uint32) []string {
	h := x.headers(kind)
	names := make([]string, 0, len(h)+1)
	if kind == 0 && x.host != "" {
		names = append(names, "Host")
	}
	for k := range h {
		if kind == 0 && k == "Host" {
			continue
		}
		names = append(names, k)
	}
	return names
}

// readRequestBody reads up to len(p) bytes of the request body. Everything
// read is kept so the next handler still receives the whole body.
func (x *exchange) readRequestBody(p []byte) (n int, eof bool) {
	if x.reqBodyConsumed < len(x.reqBodyBuf) {
		n = copy(p, x.reqBodyBuf[x.reqBodyConsumed:])
		x.reqBodyConsumed += n
		return n, x.reqBodyEOF && x.reqBodyConsumed == len(x.reqBodyBuf)
	}
	if x.reqBody == nil || x.reqBodyEOF {
		return 0, true
	}
	n, err := io.ReadFull(x.reqBody, p)
	x.reqBodyBuf = append(x.reqBodyBuf, p[:n]...)
	x.reqBodyConsumed += n
	if err != nil {
		x.reqBodyEOF = true
	}
	return n, x.reqBodyEOF
}

// readResponseBody reads the buffered response body (after next, with
// buffer_response).
func (x *exchange) readResponseBody(p []byte) (n int, eof bool) {
	b := x.respBody.Bytes()
	n = copy(p, b[min(x.respBodyOffset, len(b)):])
	x.respBodyOffset += n
	return n, x.respBodyOffset >= len(b)
}

// writeResponseBody appends to the response body; after next, the first
// write replaces the upstream's body, as the http-wasm spec says.
func (x *exchange) writeResponseBody(p []byte) bool {
	if !x.respWritable {
		return false
	}
	if x.afterNext && !x.respBodyRewritten {
		x.respBody.Reset()
		x.respBodyRewritten = true
	}
	if x.respBody.Len()+len(p) > maxResponseBody {
		return false
	}
	x.respBody.Write(p)
	return true
}

// setBackend picks name if the route allows it.
func (x *exchange) setBackend(name string) bool {
	if x.route != nil {
		for i, b := range x.route.Backends {
			if backendNamed(b.Name, name) {
				b := x.route.Backends[i]
				x.backend = &b
				return true
			}
		}
	}
	x.backendRejected = true
	return false
}

// backendNamed reports whether a backend called full ("<namespace>/<service>:<port>"
// as the operator names them) answers to name: the full name, or the short
// "<service>:<port>", which resolves in the route's own namespace (every
// backend of a route is in its Ingress's namespace).
func backendNamed(full, name string) bool {
	if full == name {
		return true
	}
	if strings.Contains(name, "/") {
		return false
	}
	_, short, ok := strings.Cut(full, "/")
	return ok && short == name
}

// backendNames lists the route's backends, for messages.
func (x *exchange) backendNames() []string {
	if x.route == nil {
		return nil
	}
	names := make([]string, len(x.route.Backends))
	for i, b := range x.route.Backends {
		names[i] = b.Name
	}
	return names
}
