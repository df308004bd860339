package gatewaytable

import (
	"strings"

	"github.com/tailplane/tailplane/proxy/config"
)

// bucket is the entries of one hostname in config order, indexed by path so
// that a match tries only the entries whose path can fit: with 1,000
// entries on a host, a request tries a handful, not 1,000 (the benchmarks'
// BenchmarkMatch1000). The order in which it tries them is still the
// config's, so the first fit is the same as a scan's.
type bucket struct {
	entries []*entry
	exact   map[string][]int // Exact entries by path
	first   map[string][]int // PathPrefix entries by their path's first element
	always  []int            // PathPrefix "/" and RegularExpression entries
}

func newBucket() *bucket {
	return &bucket{exact: map[string][]int{}, first: map[string][]int{}}
}

// add appends e; positions only grow, so every index list stays sorted.
func (b *bucket) add(e *entry) {
	i := len(b.entries)
	b.entries = append(b.entries, e)
	switch {
	case e.match.pathType == config.MatchExact:
		b.exact[e.match.path] = append(b.exact[e.match.path], i)
	case e.match.pathType == config.MatchPathPrefix && e.match.path != "":
		k := firstElement(e.match.path)
		b.first[k] = append(b.first[k], i)
	default:
		b.always = append(b.always, i)
	}
}

// firstElement is the first element of a path: "a" for "/a/b", "/a" and
// "/a/"; "" for a path that does not start with "/".
func firstElement(p string) string {
	if !strings.HasPrefix(p, "/") {
		return ""
	}
	p = p[1:]
	if i := strings.IndexByte(p, '/'); i >= 0 {
		p = p[:i]
	}
	return p
}

// match returns the first entry, in config order, that fits r: it merges
// the three sorted candidate lists by position.
func (b *bucket) match(r *request) *entry {
	lists := [3][]int{b.exact[r.path], b.first[firstElement(r.path)], b.always}
	for {
		best := -1
		for k := range lists {
			if len(lists[k]) > 0 && (best < 0 || lists[k][0] < lists[best][0]) {
				best = k
			}
		}
		if best < 0 {
			return nil
		}
		i := lists[best][0]
		lists[best] = lists[best][1:]
		if b.entries[i].match.matches(r) {
			return b.entries[i]
		}
	}
}
