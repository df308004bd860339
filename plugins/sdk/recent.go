package sdk

import "bytes"

// In a Go guest an allocation costs about as much as a call into the host
// (~0.2 µs for a string, ~0.35 µs for a slice of strings, measured with
// plugins/bench), and a byte loop in Go compiled to WebAssembly is several
// times slower than the standard library's assembly (bytes.IndexByte,
// bytes.Equal). Values a routing plugin reads repeat from request to
// request (a canary header, the route's backends, a caller's tags), so the
// SDK remembers the last ones it returned and hands them out again instead
// of allocating; docs/performance.md ("Plugins") has the figures.

// recentStrings remembers the last strings the SDK returned.
type recentStrings struct {
	vals [8]string
	next int
}

// get returns b as a string: a remembered string equal to b, else a new
// copy, which is remembered in place of the oldest.
func (r *recentStrings) get(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	for _, v := range r.vals {
		// string(b) in a comparison does not allocate.
		if len(v) == len(b) && v == string(b) {
			return v
		}
	}
	s := string(b)
	r.vals[r.next] = s
	r.next = (r.next + 1) % len(r.vals)
	return s
}

// recentLists remembers the last lists the SDK returned, by their encoding
// (NUL-terminated values): equal encodings are equal lists, whichever
// function read them.
type recentLists struct {
	raw    [4][]byte
	values [4][]string
	next   int
}

// get returns the values of raw, remembered or newly split; each string
// goes through strs. The slice may be handed out again: callers must not
// modify it (its capacity is its length, so append copies).
func (r *recentLists) get(strs *recentStrings, raw []byte) []string {
	for i, b := range r.raw {
		if b != nil && bytes.Equal(b, raw) {
			return r.values[i]
		}
	}
	out := make([]string, 0, bytes.Count(raw, []byte{0}))
	for rest := raw; len(rest) > 0; {
		i := bytes.IndexByte(rest, 0)
		if i < 0 {
			i = len(rest) // not NUL-terminated: the host's bug, keep the value
		}
		out = append(out, strs.get(rest[:i]))
		rest = rest[min(i+1, len(rest)):]
	}
	out = out[:len(out):len(out)]
	r.raw[r.next], r.values[r.next] = bytes.Clone(raw), out
	r.next = (r.next + 1) % len(r.raw)
	return out
}
