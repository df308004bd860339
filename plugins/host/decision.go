package host

import (
	"fmt"
	"net/http"
	"slices"

	"github.com/tailplane/tailplane/proxy/route"
)

// newRoutingExchange builds the guest's view of req: the request as the
// previous routers left it (their header edits, URI and method applied).
func newRoutingExchange(p *Plugin, req *route.Request, prev route.Decision) *exchange {
	x, _ := p.exchanges.Get().(*exchange)
	if x == nil {
		x = new(exchange)
	}
	*x = exchange{
		plugin:       p,
		method:       req.Method,
		uri:          req.URI,
		host:         req.Host,
		proto:        "HTTP/1.1",
		reqHeader:    req.Header,
		status:       http.StatusOK,
		respWritable: true,
		route:        req.Route,
		identity:     req.Identity,
		public:       req.Public,
	}
	if prev.Method != "" {
		x.method = prev.Method
	}
	if prev.RewriteURI != "" {
		x.uri = prev.RewriteURI
	}
	if len(prev.SetRequestHeaders) > 0 || len(prev.RemoveRequestHeaders) > 0 {
		x.reqHeader = req.Header.Clone()
		if x.reqHeader == nil {
			x.reqHeader = http.Header{}
		}
		x.reqHeaderOwned = true
		for _, k := range prev.RemoveRequestHeaders {
			x.reqHeader.Del(k)
		}
		for k, v := range prev.SetRequestHeaders {
			x.reqHeader[http.CanonicalHeaderKey(k)] = slices.Clone(v)
		}
	}
	return x
}

// decision folds what the guest did into prev. next reports whether the
// guest passed the request on (1) or answered it itself (0).
func (x *exchange) decision(prev route.Decision, next bool) (route.Decision, error) {
	d := prev
	d.DenyPublic = prev.DenyPublic || x.denyPublic
	if !next {
		// The guest answered: a redirect when it set 3xx and Location,
		// otherwise a local response (a deny, or any status it chose).
		d.Backend = nil
		d.SetRequestHeaders, d.RemoveRequestHeaders, d.RewriteURI, d.Method = nil, nil, "", ""
		d.Status = x.status
		d.SetResponseHeaders = mergeHeaders(prev.SetResponseHeaders, x.respHeader)
		if x.status >= 300 && x.status < 400 {
			loc := x.respHeader.Get("Location")
			if loc == "" {
				return prev, fmt.Errorf("plugin %s: answered %d without a Location header", x.plugin.cfg.Name, x.status)
			}
			d.Action, d.Location = route.Redirect, loc
			d.SetResponseHeaders.Del("Location")
			if len(d.SetResponseHeaders) == 0 {
				d.SetResponseHeaders = nil
			}
			return d, nil
		}
		d.Action, d.Body = route.Deny, x.respBody.String()
		return d, nil
	}
	if x.backend != nil {
		d.Backend = x.backend
	}
	if x.uriChanged {
		d.RewriteURI = x.uri
	}
	if x.methodChanged {
		d.Method = x.method
	}
	if len(x.editedReq) > 0 {
		set := cloneHeader(prev.SetRequestHeaders)
		remove := slices.Clone(prev.RemoveRequestHeaders)
		for name := range x.editedReq {
			remove = slices.DeleteFunc(remove, func(r string) bool { return http.CanonicalHeaderKey(r) == name })
			if vals := x.reqHeader[name]; len(vals) > 0 {
				set[name] = slices.Clone(vals)
			} else {
				delete(set, name)
				remove = append(remove, name)
			}
		}
		if len(set) == 0 {
			set = nil
		}
		slices.Sort(remove)
		d.SetRequestHeaders, d.RemoveRequestHeaders = set, remove
	}
	if len(x.respHeader) > 0 {
		d.SetResponseHeaders = mergeHeaders(prev.SetResponseHeaders, x.respHeader)
	}
	return d, nil
}

func cloneHeader(h http.Header) http.Header {
	if h == nil {
		return http.Header{}
	}
	return h.Clone()
}

// mergeHeaders returns a copy of base with over's values replacing base's.
func mergeHeaders(base, over http.Header) http.Header {
	out := cloneHeader(base)
	for k, v := range over {
		out[k] = slices.Clone(v)
	}
	return out
}
