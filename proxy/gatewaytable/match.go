package gatewaytable

import (
	"net/http"
	"net/url"
	"regexp"
	"strings"

	"github.com/tailplane/tailplane/proxy/config"
)

// matcher is one entry's compiled HTTPMatch.
type matcher struct {
	pathType config.PathMatchType
	// path is the Exact path, or the PathPrefix without its trailing slash
	// ("" for "/").
	path    string
	re      *regexp.Regexp // RegularExpression
	headers []valueMatcher
	query   []valueMatcher
	method  string
}

type valueMatcher struct {
	name  string
	value string
	re    *regexp.Regexp
}

// compileMatch prepares m, which passed config validation (so its
// regular expressions compile).
func compileMatch(m config.HTTPMatch) matcher {
	c := matcher{pathType: m.PathType, path: m.Path, method: m.Method}
	switch m.PathType {
	case config.MatchRegularExpression:
		c.re = anchored(m.Path)
	case config.MatchExact:
	default:
		c.pathType = config.MatchPathPrefix
		c.path = strings.TrimSuffix(m.Path, "/")
	}
	c.headers = compileValues(m.Headers, http.CanonicalHeaderKey)
	c.query = compileValues(m.QueryParams, func(s string) string { return s })
	return c
}

func compileValues(vs []config.ValueMatch, key func(string) string) []valueMatcher {
	out := make([]valueMatcher, 0, len(vs))
	for _, v := range vs {
		vm := valueMatcher{name: key(v.Name), value: v.Value}
		if v.Regex {
			vm.re = anchored(v.Value)
		}
		out = append(out, vm)
	}
	return out
}

// anchored compiles expr to match whole strings only. Validation already
// compiled it, so MustCompile cannot fail here.
func anchored(expr string) *regexp.Regexp {
	return regexp.MustCompile(`^(?:` + expr + `)$`)
}

// request is the part of an HTTP request that matching reads; the query is
// parsed on first use only, once for all entries.
type request struct {
	method, path, rawQuery string
	header                 http.Header
	query                  url.Values
}

func (r *request) queryValues() url.Values {
	if r.query == nil {
		r.query, _ = url.ParseQuery(r.rawQuery)
		if r.query == nil {
			r.query = url.Values{}
		}
	}
	return r.query
}

func (m *matcher) matches(r *request) bool {
	switch m.pathType {
	case config.MatchExact:
		if r.path != m.path {
			return false
		}
	case config.MatchRegularExpression:
		if !m.re.MatchString(r.path) {
			return false
		}
	default:
		if !prefixMatch(m.path, r.path) {
			return false
		}
	}
	if m.method != "" && r.method != m.method {
		return false
	}
	for _, h := range m.headers {
		if !h.matchesAny(r.header[h.name]) {
			return false
		}
	}
	if len(m.query) > 0 {
		q := r.queryValues()
		for _, v := range m.query {
			if !v.matchesAny(q[v.name]) {
				return false
			}
		}
	}
	return true
}

// prefixMatch matches whole path elements, like routetable's: p (without
// its trailing slash) matches p, p/ and p/anything, not p-anything.
func prefixMatch(p, path string) bool {
	return p == "" || path == p || strings.HasPrefix(path, p) && path[len(p)] == '/'
}

// matchesAny reports whether one of the request's values fits.
func (v *valueMatcher) matchesAny(values []string) bool {
	for _, s := range values {
		if v.re != nil && v.re.MatchString(s) || v.re == nil && s == v.value {
			return true
		}
	}
	return false
}
