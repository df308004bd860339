package host

import (
	"bytes"
	"io"
	"net/http"
	"strconv"

	"github.com/charmbracelet/log"

	"github.com/tailplane/tailplane/plugins/sdk/abi"
)

// Middleware runs the plugin as an http-wasm middleware in front of next,
// with the spec's full request/response cycle: handle_request, then (if the
// guest passed the request on) next, then handle_response on the same
// instance. With buffer_request the guest reads the request body and next
// still receives it; with buffer_response next's answer is held so
// handle_response can read and replace status, headers and body. The
// instance is pinned to the request until handle_response returns, so
// PoolSize bounds concurrent requests in this mode.
//
// The routing module answers as for a request with no route, identity or
// Funnel: set_backend is refused. Use Route for routing decisions.
func (p *Plugin) Middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.inflight.RLock()
		defer p.inflight.RUnlock()
		if p.closed {
			http.Error(w, unavailableBody, http.StatusServiceUnavailable)
			return
		}
		p.fails.requests.Add(1)
		x := &exchange{
			plugin:       p,
			method:       r.Method,
			uri:          r.URL.RequestURI(),
			host:         r.Host,
			proto:        r.Proto,
			sourceAddr:   r.RemoteAddr,
			reqHeader:    r.Header,
			reqTrailer:   r.Trailer,
			reqBody:      r.Body,
			status:       http.StatusOK,
			respWritable: true,
		}
		var in *instance
		passOn, reqCtx, err := p.call(r.Context(), x, &in)
		if err != nil {
			if p.cfg.FailurePolicy == FailOpen {
				p.m.failOpen.Inc()
				p.fails.record(classOf(err), err, log.WarnLevel, msgFailedOpen)
				next.ServeHTTP(w, r)
				return
			}
			p.m.failClosed.Inc()
			p.fails.record(classOf(err), err, log.ErrorLevel, msgFailedClosed)
			http.Error(w, unavailableBody, http.StatusServiceUnavailable)
			return
		}
		if !passOn {
			p.pool.put(in)
			writeResponse(w, x)
			return
		}
		out := outgoing(r, x)
		x.afterNext = true
		buffered := x.features&abi.FeatureBufferResponse != 0
		if buffered {
			rec := &recorder{header: http.Header{}, status: http.StatusOK}
			next.ServeHTTP(rec, out)
			x.status, x.respHeader, x.respTrailer = rec.status, rec.header, nil
			x.respBody = rec.body
			if err := p.callResponse(r.Context(), x, in, reqCtx, false); err != nil {
				p.m.failClosed.Inc()
				p.fails.record(classOf(err), err, log.ErrorLevel, msgResponseFailed)
				http.Error(w, unavailableBody, http.StatusServiceUnavailable)
				return
			}
			writeResponse(w, x)
			return
		}
		for k, v := range x.respHeader {
			w.Header()[k] = v
		}
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		next.ServeHTTP(sw, out)
		x.status, x.respWritable = sw.status, false
		x.respHeader = w.Header()
		if err := p.callResponse(r.Context(), x, in, reqCtx, false); err != nil {
			p.fails.record(classOf(err), err, log.ErrorLevel, msgResponseLate)
		}
	})
}

// outgoing is the request next receives: the guest's method, URI, headers,
// and the body with whatever the guest read (or wrote) replayed first.
func outgoing(r *http.Request, x *exchange) *http.Request {
	out := r.Clone(r.Context())
	out.Method = x.method
	if x.uriChanged {
		if u, err := r.URL.Parse(x.uri); err == nil {
			out.URL = u
			out.RequestURI = x.uri
		}
	}
	out.Header = x.reqHeader
	if x.reqBodyRewritten || x.reqBodyEOF {
		out.Body = io.NopCloser(bytes.NewReader(x.reqBodyBuf))
		out.ContentLength = int64(len(x.reqBodyBuf))
		out.Header.Set("Content-Length", strconv.Itoa(len(x.reqBodyBuf)))
	} else if len(x.reqBodyBuf) > 0 {
		out.Body = struct {
			io.Reader
			io.Closer
		}{io.MultiReader(bytes.NewReader(x.reqBodyBuf), r.Body), r.Body}
	}
	return out
}

func writeResponse(w http.ResponseWriter, x *exchange) {
	for k, v := range x.respHeader {
		w.Header()[k] = v
	}
	if x.respBodyRewritten || !x.afterNext {
		w.Header().Set("Content-Length", strconv.Itoa(x.respBody.Len()))
	}
	w.WriteHeader(x.status)
	_, _ = w.Write(x.respBody.Bytes())
	for k, v := range x.respTrailer {
		w.Header()[http.TrailerPrefix+k] = v
	}
}

// recorder buffers next's response for handle_response.
type recorder struct {
	header http.Header
	status int
	wrote  bool
	body   bytes.Buffer
}

func (r *recorder) Header() http.Header { return r.header }
func (r *recorder) WriteHeader(code int) {
	if !r.wrote {
		r.status, r.wrote = code, true
	}
}
func (r *recorder) Write(b []byte) (int, error) {
	r.wrote = true
	if r.body.Len()+len(b) > maxResponseBody {
		return 0, io.ErrShortWrite
	}
	return r.body.Write(b)
}

// statusWriter remembers the status next sent (unbuffered mode).
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (s *statusWriter) WriteHeader(code int)        { s.status = code; s.ResponseWriter.WriteHeader(code) }
func (s *statusWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }
