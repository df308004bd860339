package gatewayapi

import (
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"time"

	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/tailplane/tailplane/proxy/config"
)

// PluginGroup and PluginKind are what an ExtensionRef filter names to run
// a RoutingPlugin for a rule.
const (
	PluginGroup = "tailplane.dev"
	PluginKind  = "RoutingPlugin"
)

// ReasonPluginNotFound is the ResolvedRefs reason of a route whose
// ExtensionRef names a RoutingPlugin that does not exist or does not
// serve: the rule answers 500 until it does, as the spec asks of a filter
// that cannot be resolved.
const ReasonPluginNotFound = "PluginNotFound"

// rules is what a route's rules become: entries without hostnames (the
// attachment adds them), the references that did not resolve (the route's
// ResolvedRefs), what is not supported (its Accepted), and the plugins'
// Secrets the proxy reads.
type rules struct {
	http          []config.HTTPRoute
	backends      []config.WeightedBackend // TLS, TCP, UDP rules
	tls           []config.TLSRoute
	unresolved    []unresolved
	unsupported   []string
	pluginSecrets []string
}

// translate turns route r's rules into proxy entries.
func translate(r *Route, grants []gatewayv1.ReferenceGrant, look Lookups) (*rules, error) {
	out := &rules{}
	var err error
	switch {
	case r.HTTP != nil:
		for i, rule := range r.HTTP.Spec.Rules {
			if err = out.httpRule(r, i, rule, grants, look); err != nil {
				return nil, err
			}
		}
	case r.GRPC != nil:
		for i, rule := range r.GRPC.Spec.Rules {
			if err = out.grpcRule(r, i, rule, grants, look); err != nil {
				return nil, err
			}
		}
	case r.TLS != nil:
		for i, rule := range r.TLS.Spec.Rules {
			bs, err := out.backendRefs(r, rule.BackendRefs, false, grants, look)
			if err != nil {
				return nil, err
			}
			out.tls = append(out.tls, config.TLSRoute{Name: ruleName(r, i), Backends: bs})
		}
	case r.TCP != nil:
		for i, rule := range r.TCP.Spec.Rules {
			if err = out.streamRule(r, i, rule.BackendRefs, grants, look); err != nil {
				return nil, err
			}
		}
	case r.UDP != nil:
		for i, rule := range r.UDP.Spec.Rules {
			if err = out.streamRule(r, i, rule.BackendRefs, grants, look); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

func ruleName(r *Route, i int) string { return r.Namespace + "/" + r.Name + "/" + strconv.Itoa(i) }

// streamRule takes the first rule of a TCPRoute or UDPRoute: a listener
// forwards to one rule's backends; further rules are not supported.
func (out *rules) streamRule(r *Route, i int, refs []gatewayv1.BackendRef, grants []gatewayv1.ReferenceGrant, look Lookups) error {
	if i > 0 {
		out.unsupported = append(out.unsupported, fmt.Sprintf("rule %d: a %s serves its first rule only", i, r.Kind))
		return nil
	}
	bs, err := out.backendRefs(r, refs, false, grants, look)
	out.backends = bs
	return err
}

func (out *rules) backendRefs(r *Route, refs []gatewayv1.BackendRef, h2c bool, grants []gatewayv1.ReferenceGrant, look Lookups) ([]config.WeightedBackend, error) {
	var bs []config.WeightedBackend
	for _, ref := range refs {
		b, bad, err := resolveBackend(r, ref, h2c, grants, look)
		if err != nil {
			return nil, err
		}
		if bad != nil {
			out.unresolved = append(out.unresolved, *bad)
		}
		bs = append(bs, b)
	}
	return bs, nil
}

// refuseBackendFilters notes that rule i has filters on a backendRef,
// which are not supported.
func (out *rules) refuseBackendFilters(i, filters int) {
	if filters > 0 {
		out.unsupported = append(out.unsupported, fmt.Sprintf("rule %d: filters on a backendRef are not supported", i))
	}
}

func (out *rules) httpRule(r *Route, i int, rule gatewayv1.HTTPRouteRule, grants []gatewayv1.ReferenceGrant, look Lookups) error {
	refs := make([]gatewayv1.BackendRef, len(rule.BackendRefs))
	for j, b := range rule.BackendRefs {
		refs[j] = b.BackendRef
		out.refuseBackendFilters(i, len(b.Filters))
	}
	bs, err := out.backendRefs(r, refs, false, grants, look)
	if err != nil {
		return err
	}
	entry := config.HTTPRoute{Name: ruleName(r, i), Backends: bs}
	for _, f := range rule.Filters {
		if err := out.filter(r, i, &entry, f, grants, look); err != nil {
			return err
		}
	}
	if t := rule.Timeouts; t != nil {
		entry.RequestTimeoutMillis, err = millis(t.Request)
		if err == nil {
			entry.BackendTimeoutMillis, err = millis(t.BackendRequest)
		}
		if err != nil {
			out.unsupported = append(out.unsupported, fmt.Sprintf("rule %d: timeouts: %v", i, err))
		}
	}
	matches := rule.Matches
	if len(matches) == 0 {
		matches = []gatewayv1.HTTPRouteMatch{{}}
	}
	for _, m := range matches {
		e := entry
		e.Match = httpMatch(m)
		out.http = append(out.http, e)
	}
	return nil
}

func (out *rules) grpcRule(r *Route, i int, rule gatewayv1.GRPCRouteRule, grants []gatewayv1.ReferenceGrant, look Lookups) error {
	refs := make([]gatewayv1.BackendRef, len(rule.BackendRefs))
	for j, b := range rule.BackendRefs {
		refs[j] = b.BackendRef
		out.refuseBackendFilters(i, len(b.Filters))
	}
	bs, err := out.backendRefs(r, refs, true, grants, look)
	if err != nil {
		return err
	}
	entry := config.HTTPRoute{Name: ruleName(r, i), Backends: bs}
	for _, f := range rule.Filters {
		hf := gatewayv1.HTTPRouteFilter{Type: gatewayv1.HTTPRouteFilterType(f.Type), RequestHeaderModifier: f.RequestHeaderModifier,
			ResponseHeaderModifier: f.ResponseHeaderModifier, RequestMirror: f.RequestMirror, ExtensionRef: f.ExtensionRef}
		if err := out.filter(r, i, &entry, hf, grants, look); err != nil {
			return err
		}
	}
	matches := rule.Matches
	if len(matches) == 0 {
		matches = []gatewayv1.GRPCRouteMatch{{}}
	}
	for _, m := range matches {
		e := entry
		e.Match = grpcMatch(m)
		out.http = append(out.http, e)
	}
	return nil
}

// filter adds one rule filter to entry.
func (out *rules) filter(r *Route, i int, entry *config.HTTPRoute, f gatewayv1.HTTPRouteFilter, grants []gatewayv1.ReferenceGrant, look Lookups) error {
	switch f.Type {
	case gatewayv1.HTTPRouteFilterRequestHeaderModifier:
		entry.Filters.RequestHeaders = headerModifier(f.RequestHeaderModifier)
	case gatewayv1.HTTPRouteFilterResponseHeaderModifier:
		entry.Filters.ResponseHeaders = headerModifier(f.ResponseHeaderModifier)
	case gatewayv1.HTTPRouteFilterRequestRedirect:
		if rr := f.RequestRedirect; rr != nil {
			red := &config.Redirect{Path: pathModifier(rr.Path)}
			if rr.Scheme != nil {
				red.Scheme = *rr.Scheme
			}
			if rr.Hostname != nil {
				red.Hostname = string(*rr.Hostname)
			}
			if rr.Port != nil {
				red.Port = int(*rr.Port)
			}
			if rr.StatusCode != nil {
				red.StatusCode = *rr.StatusCode
			}
			entry.Filters.Redirect = red
		}
	case gatewayv1.HTTPRouteFilterURLRewrite:
		if rw := f.URLRewrite; rw != nil {
			entry.Filters.Rewrite = &config.Rewrite{Path: pathModifier(rw.Path)}
			if rw.Hostname != nil {
				entry.Filters.Rewrite.Hostname = string(*rw.Hostname)
			}
		}
	case gatewayv1.HTTPRouteFilterRequestMirror:
		if m := f.RequestMirror; m != nil {
			b, bad, err := resolveBackend(r, gatewayv1.BackendRef{BackendObjectReference: m.BackendRef}, false, grants, look)
			if err != nil {
				return err
			}
			if bad != nil {
				out.unresolved = append(out.unresolved, *bad)
				return nil
			}
			entry.Filters.Mirrors = append(entry.Filters.Mirrors, config.Mirror{Backend: b.Backend, Percent: mirrorPercent(m)})
		}
	case gatewayv1.HTTPRouteFilterExtensionRef:
		ref := f.ExtensionRef
		if ref == nil || string(ref.Group) != PluginGroup || string(ref.Kind) != PluginKind {
			out.unresolved = append(out.unresolved, unresolved{string(gatewayv1.RouteReasonInvalidKind),
				fmt.Sprintf("rule %d: an ExtensionRef filter must name a %s.%s", i, PluginKind, PluginGroup)})
			entry.Backends = []config.WeightedBackend{{Backend: config.Backend{Service: "unresolved-filter"}, Weight: 1, Invalid: true}}
			return nil
		}
		p, secret, ok, err := look.Plugin(r.Namespace, string(ref.Name))
		if err != nil {
			return err
		}
		if !ok {
			out.unresolved = append(out.unresolved, unresolved{ReasonPluginNotFound,
				fmt.Sprintf("rule %d: RoutingPlugin %s/%s does not exist or does not serve", i, r.Namespace, ref.Name)})
			entry.Backends = []config.WeightedBackend{{Backend: config.Backend{Service: "unresolved-filter"}, Weight: 1, Invalid: true}}
			return nil
		}
		entry.Plugins = append(entry.Plugins, p)
		out.pluginSecrets = append(out.pluginSecrets, secret)
	default:
		out.unsupported = append(out.unsupported, fmt.Sprintf("rule %d: filter type %s is not supported", i, f.Type))
	}
	return nil
}

func headerModifier(h *gatewayv1.HTTPHeaderFilter) *config.HeaderModifier {
	if h == nil {
		return nil
	}
	out := &config.HeaderModifier{Remove: h.Remove}
	for _, x := range h.Set {
		out.Set = append(out.Set, config.Header{Name: string(x.Name), Value: x.Value})
	}
	for _, x := range h.Add {
		out.Add = append(out.Add, config.Header{Name: string(x.Name), Value: x.Value})
	}
	return out
}

func pathModifier(p *gatewayv1.HTTPPathModifier) *config.PathModifier {
	switch {
	case p == nil:
		return nil
	case p.Type == gatewayv1.FullPathHTTPPathModifier && p.ReplaceFullPath != nil:
		return &config.PathModifier{Type: config.ReplaceFullPath, Value: *p.ReplaceFullPath}
	case p.Type == gatewayv1.PrefixMatchHTTPPathModifier && p.ReplacePrefixMatch != nil:
		return &config.PathModifier{Type: config.ReplacePrefixMatch, Value: *p.ReplacePrefixMatch}
	}
	return nil
}

func mirrorPercent(m *gatewayv1.HTTPRequestMirrorFilter) int {
	switch {
	case m.Percent != nil:
		return int(*m.Percent)
	case m.Fraction != nil:
		den := int32(100)
		if m.Fraction.Denominator != nil && *m.Fraction.Denominator > 0 {
			den = *m.Fraction.Denominator
		}
		return int(m.Fraction.Numerator * 100 / den)
	}
	return 0
}

// millis converts a Gateway API duration ("10s", "500ms", "1h30m"; a
// subset of Go's syntax) to milliseconds; zero disables the timeout.
func millis(d *gatewayv1.Duration) (int64, error) {
	if d == nil {
		return 0, nil
	}
	v, err := time.ParseDuration(string(*d))
	if err != nil {
		return 0, fmt.Errorf("bad duration %q: %w", *d, err)
	}
	return v.Milliseconds(), nil
}

func httpMatch(m gatewayv1.HTTPRouteMatch) config.HTTPMatch {
	out := config.HTTPMatch{PathType: config.MatchPathPrefix, Path: "/"}
	if p := m.Path; p != nil {
		if p.Type != nil {
			out.PathType = config.PathMatchType(*p.Type)
		}
		if p.Value != nil {
			out.Path = *p.Value
		}
	}
	for _, h := range m.Headers {
		out.Headers = append(out.Headers, config.ValueMatch{Name: string(h.Name), Value: h.Value,
			Regex: h.Type != nil && *h.Type == gatewayv1.HeaderMatchRegularExpression})
	}
	for _, q := range m.QueryParams {
		out.QueryParams = append(out.QueryParams, config.ValueMatch{Name: string(q.Name), Value: q.Value,
			Regex: q.Type != nil && *q.Type == gatewayv1.QueryParamMatchRegularExpression})
	}
	if m.Method != nil {
		out.Method = string(*m.Method)
	}
	return out
}

// grpcMatch is a GRPCRoute match as a match on the request path
// "/<service>/<method>" (gRPC's, over HTTP/2), plus its headers.
func grpcMatch(m gatewayv1.GRPCRouteMatch) config.HTTPMatch {
	out := config.HTTPMatch{PathType: config.MatchPathPrefix, Path: "/"}
	if mm := m.Method; mm != nil {
		svc, method := "", ""
		if mm.Service != nil {
			svc = *mm.Service
		}
		if mm.Method != nil {
			method = *mm.Method
		}
		regex := mm.Type != nil && *mm.Type == gatewayv1.GRPCMethodMatchRegularExpression
		switch {
		case regex:
			out.PathType, out.Path = config.MatchRegularExpression, "/("+orAny(svc, "[^/]+")+")/("+orAny(method, "[^/]+")+")"
		case svc != "" && method != "":
			out.PathType, out.Path = config.MatchExact, "/"+svc+"/"+method
		case svc != "":
			out.PathType, out.Path = config.MatchPathPrefix, "/"+svc
		case method != "":
			out.PathType, out.Path = config.MatchRegularExpression, "/[^/]+/"+regexp.QuoteMeta(method)
		}
	}
	for _, h := range m.Headers {
		out.Headers = append(out.Headers, config.ValueMatch{Name: string(h.Name), Value: h.Value,
			Regex: h.Type != nil && *h.Type == gatewayv1.GRPCHeaderMatchRegularExpression})
	}
	return out
}

func orAny(s, any string) string {
	if s == "" {
		return any
	}
	return s
}

// sortHTTP orders a listener's entries by the Gateway API's precedence:
// Exact paths, then regular expressions, then prefixes, the longer first;
// then a method match; then more header matches; then more query
// matches. Entries that tie keep their order: routes oldest first, then by
// namespace and name, then rule and match order.
func sortHTTP(es []config.HTTPRoute) {
	rank := func(t config.PathMatchType) int {
		switch t {
		case config.MatchExact:
			return 0
		case config.MatchRegularExpression:
			return 1
		}
		return 2
	}
	sort.SliceStable(es, func(i, j int) bool {
		a, b := es[i].Match, es[j].Match
		if rank(a.PathType) != rank(b.PathType) {
			return rank(a.PathType) < rank(b.PathType)
		}
		if len(a.Path) != len(b.Path) {
			return len(a.Path) > len(b.Path)
		}
		if (a.Method != "") != (b.Method != "") {
			return a.Method != ""
		}
		if len(a.Headers) != len(b.Headers) {
			return len(a.Headers) > len(b.Headers)
		}
		return len(a.QueryParams) > len(b.QueryParams)
	})
}
