package cluster

import "reflect"

// holds reports whether the live object have holds every field of want (an
// object as applied): a server-side apply of want would change nothing the
// operator owns. Fields others added (defaults, status, other managers) do
// not matter; an empty map or list in want matches a missing field. Where it
// cannot tell (a list of another length, a value in another form), it says
// no, and the apply is sent.
func holds(have, want any) bool {
	switch w := want.(type) {
	case map[string]any:
		h, ok := have.(map[string]any)
		if !ok {
			return len(w) == 0 && have == nil
		}
		for k, wv := range w {
			hv, present := h[k]
			if !present {
				if empty(wv) {
					continue
				}
				return false
			}
			if !holds(hv, wv) {
				return false
			}
		}
		return true
	case []any:
		h, ok := have.([]any)
		if !ok {
			return len(w) == 0 && have == nil
		}
		if len(h) != len(w) {
			return false
		}
		for i := range w {
			if !holds(h[i], w[i]) {
				return false
			}
		}
		return true
	case nil:
		return true
	}
	if hf, ok := number(have); ok {
		wf, ok := number(want)
		return ok && hf == wf
	}
	return reflect.DeepEqual(have, want)
}

// empty reports whether v is a value an apply leaves out: nil, an empty map,
// list or string.
func empty(v any) bool {
	switch x := v.(type) {
	case nil:
		return true
	case map[string]any:
		return len(x) == 0
	case []any:
		return len(x) == 0
	case string:
		return x == ""
	}
	return false
}

// number is v as a float64 when it is a JSON number (int64 or float64 after
// decoding).
func number(v any) (float64, bool) {
	switch x := v.(type) {
	case int64:
		return float64(x), true
	case int:
		return float64(x), true
	case float64:
		return x, true
	}
	return 0, false
}
