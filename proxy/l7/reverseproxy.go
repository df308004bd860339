package l7

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sync"
	"time"

	"github.com/charmbracelet/log"

	"github.com/tailplane/tailplane/proxy/metrics"
	"github.com/tailplane/tailplane/proxy/route"
)

// UpstreamErrorBody is the short body of the 502 answered when a backend
// cannot be reached or fails mid-request.
const UpstreamErrorBody = "upstream unavailable\n"

// TimeoutBody is the short body of the 504 answered when a route's timeout
// passes before the backend answers.
const TimeoutBody = "upstream timed out\n"

// NewTransport returns the pooled keep-alive transport shared by all
// backends, with bounded dial, TLS and response-header waits so a dead
// backend yields a quick 502 rather than a hang. Backends spoken to over TLS
// are not verified (the official operator's https+insecure).
func NewTransport() *http.Transport {
	dialer := &net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}
	return &http.Transport{
		DialContext:           dialer.DialContext,
		MaxIdleConns:          1024,
		MaxIdleConnsPerHost:   256,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   5 * time.Second,
		ResponseHeaderTimeout: 60 * time.Second,
		ExpectContinueTimeout: time.Second,
		TLSClientConfig:       &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // https+insecure backends by design
	}
}

// upstream is what the reverse proxy needs to know about one request.
type upstream struct {
	backend  route.Backend
	https    bool
	h2c      bool
	identity *route.Identity
	// public marks a request from the public internet (Funnel).
	public   bool
	decision route.Decision
}

type upstreamKey struct{}

type reverseProxy struct {
	rp      *httputil.ReverseProxy
	metrics *metrics.Metrics
	log     *log.Logger
}

// NewH2CTransport returns a transport that speaks HTTP/2 without TLS
// (prior knowledge) to every backend: h2c backends, gRPC's usual.
func NewH2CTransport() *http.Transport {
	t := NewTransport()
	t.TLSClientConfig = nil
	t.Protocols = new(http.Protocols)
	t.Protocols.SetUnencryptedHTTP2(true)
	return t
}

// splitTransport sends requests for h2c backends through h2c, the rest
// through plain.
type splitTransport struct{ plain, h2c http.RoundTripper }

func (t splitTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if up, _ := req.Context().Value(upstreamKey{}).(*upstream); up != nil && up.h2c {
		return t.h2c.RoundTrip(req)
	}
	return t.plain.RoundTrip(req)
}

func newReverseProxy(transport, h2c http.RoundTripper, m *metrics.Metrics, logger *log.Logger) *reverseProxy {
	p := &reverseProxy{metrics: m, log: logger}
	p.rp = &httputil.ReverseProxy{
		Transport: splitTransport{plain: transport, h2c: h2c},
		Rewrite: func(pr *httputil.ProxyRequest) {
			up := pr.In.Context().Value(upstreamKey{}).(*upstream)
			pr.Out.URL.Scheme = "http"
			if up.https {
				pr.Out.URL.Scheme = "https"
			}
			pr.Out.URL.Host = up.backend.Address
			if d := up.decision; d.Method != "" {
				pr.Out.Method = d.Method
			}
			rewriteURI(pr.Out, up.decision.RewriteURI)
			pr.SetXForwarded()
			pr.Out.Host = pr.In.Host
			if up.decision.Host != "" {
				pr.Out.Host = up.decision.Host
			}
			h := pr.Out.Header
			for _, k := range up.decision.RemoveRequestHeaders {
				h.Del(k)
			}
			for k, vs := range up.decision.SetRequestHeaders {
				h[http.CanonicalHeaderKey(k)] = vs
			}
			// Last, so neither a client nor a router can forge them.
			stripTailscale(h)
			setOrigin(h, up.public, up.identity)
		},
		ModifyResponse: func(resp *http.Response) error {
			// The handler already put the router's set headers on the
			// writer (so a 502 carries them too), and ReverseProxy adds
			// the backend's headers to the writer's: drop the backend's
			// copies, or each would reach the client twice. Added
			// values follow the backend's own.
			up := resp.Request.Context().Value(upstreamKey{}).(*upstream)
			for k := range up.decision.SetResponseHeaders {
				resp.Header.Del(k)
			}
			for _, k := range up.decision.RemoveResponseHeaders {
				resp.Header.Del(k)
			}
			addResponseHeaders(resp.Header, up.decision)
			return nil
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			up := r.Context().Value(upstreamKey{}).(*upstream)
			addResponseHeaders(w.Header(), up.decision)
			if up.decision.Timeout > 0 && errors.Is(r.Context().Err(), context.DeadlineExceeded) {
				// The route's own timeout (the client's going away
				// cancels, it has no deadline).
				m.UpstreamErrors.WithLabelValues(up.backend.Name).Inc()
				logger.Warn("upstream timed out", "backend", up.backend.Name, "timeout", up.decision.Timeout)
				http.Error(w, TimeoutBody, http.StatusGatewayTimeout)
				return
			}
			if r.Context().Err() != nil {
				// The client went away; nobody reads a 502.
				return
			}
			m.UpstreamErrors.WithLabelValues(up.backend.Name).Inc()
			logger.Warn("upstream failed", "backend", up.backend.Name, "address", up.backend.Address, "err", err)
			http.Error(w, UpstreamErrorBody, http.StatusBadGateway)
		},
		ErrorLog:   logger.StandardLog(log.StandardLogOptions{ForceLevel: log.WarnLevel}),
		BufferPool: bufferPool{pool: &sync.Pool{New: func() any { b := make([]byte, copyBufferSize); return &b }}},
	}
	return p
}

// rewriteURI replaces the upstream request-target with uri (path and
// query, already encoded), as a router's RewriteURI asks. The host checked
// that it starts with "/"; anything url.Parse refuses leaves the target as
// it was.
func rewriteURI(out *http.Request, uri string) {
	if uri == "" {
		return
	}
	u, err := url.ParseRequestURI(uri)
	if err != nil {
		return
	}
	out.URL.Path, out.URL.RawPath, out.URL.RawQuery = u.Path, u.RawPath, u.RawQuery
}

// copyBufferSize is larger than ReverseProxy's default 32 KiB: fewer, larger
// writes into the userspace network stack move big bodies faster.
const copyBufferSize = 128 << 10

// bufferPool implements httputil.BufferPool with a sync.Pool.
type bufferPool struct{ pool *sync.Pool }

func (b bufferPool) Get() []byte  { return *(b.pool.Get().(*[]byte)) }
func (b bufferPool) Put(p []byte) { b.pool.Put(&p) }

func (p *reverseProxy) forward(w http.ResponseWriter, r *http.Request, up *upstream) {
	r = r.WithContext(context.WithValue(r.Context(), upstreamKey{}, up))
	p.rp.ServeHTTP(w, r)
}

// recorder notes the status and body size; Unwrap keeps Flush and Hijack
// (WebSockets) working through http.ResponseController.
type recorder struct {
	http.ResponseWriter
	status int
	bytes  int64
}

func (r *recorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	n, err := r.ResponseWriter.Write(b)
	r.bytes += int64(n)
	return n, err
}

// Flush lets ReverseProxy stream responses through the recorder.
func (r *recorder) Flush() {
	_ = http.NewResponseController(r.ResponseWriter).Flush()
}

func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

func (r *recorder) statusOrOK() int {
	if r.status == 0 {
		return http.StatusOK
	}
	return r.status
}

type countingBody struct {
	io.ReadCloser
	add func(float64)
}

func (c *countingBody) Read(p []byte) (int, error) {
	n, err := c.ReadCloser.Read(p)
	if n > 0 {
		c.add(float64(n))
	}
	return n, err
}
