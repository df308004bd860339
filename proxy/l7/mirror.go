package l7

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"time"
)

// mirrorBodyLimit is the largest request body copied to mirrors: the copy
// is held in memory while the request is forwarded. Larger bodies, and
// bodies of unknown length, are not mirrored (the Gateway API lets
// mirroring be best effort).
const mirrorBodyLimit = 1 << 20

// mirrorTimeout bounds one mirrored request; nobody waits for its answer.
const mirrorTimeout = 30 * time.Second

// mirror sends a copy of r to each of up's mirrors, in the background,
// with the same edits and identity headers as the request to up's backend;
// their answers are dropped. It buffers r's body for the copies.
func (p *reverseProxy) mirror(r *http.Request, up *upstream, routes *Routes) {
	if len(up.decision.Mirrors) == 0 {
		return
	}
	var body []byte
	if r.Body != nil && r.Body != http.NoBody {
		if r.ContentLength < 0 || r.ContentLength > mirrorBodyLimit {
			p.log.Debug("request body too large or of unknown length to mirror", "length", r.ContentLength)
			return
		}
		b, err := io.ReadAll(io.LimitReader(r.Body, r.ContentLength))
		if err != nil {
			p.log.Debug("cannot read the request body to mirror it", "err", err)
		}
		body = b
		r.Body = readCloser{Reader: io.MultiReader(bytes.NewReader(b), r.Body), Closer: r.Body}
	}
	for _, m := range up.decision.Mirrors {
		mu := *up
		mu.backend, mu.https, mu.h2c = m, routes.HTTPSBackends[m.Address], routes.H2CBackends[m.Address]
		mu.decision.Mirrors, mu.decision.Timeout = nil, 0
		// The copy outlives the client's request, never longer than
		// mirrorTimeout.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), mirrorTimeout)
		mr := r.Clone(context.WithValue(ctx, upstreamKey{}, &mu))
		mr.Body = http.NoBody
		if body != nil {
			mr.Body = io.NopCloser(bytes.NewReader(body))
		}
		go func() {
			defer cancel()
			p.rp.ServeHTTP(discardWriter{header: http.Header{}}, mr)
		}()
	}
}

type readCloser struct {
	io.Reader
	io.Closer
}

// discardWriter drops a mirror's answer.
type discardWriter struct{ header http.Header }

func (d discardWriter) Header() http.Header         { return d.header }
func (d discardWriter) Write(b []byte) (int, error) { return len(b), nil }
func (d discardWriter) WriteHeader(int)             {}
