package runtime

import (
	"encoding/json"
	"math"
	"strconv"
	"unicode/utf8"
)

// appendJSON appends v, a decoded object's value tree, as JSON. It is the
// informers' transform on every watch event, so it writes the types
// apimachinery decodes into (maps, slices, strings, int64, float64, bools,
// nil) without reflection and without sorting map keys, several times
// faster than encoding/json; anything else goes through encoding/json.
// A whole-numbered float64 keeps its ".0": apimachinery decodes a number
// without a fraction as int64, and a float field must stay a float64 after
// the round trip through the cache.
func appendJSON(buf []byte, v any) ([]byte, error) {
	var err error
	switch x := v.(type) {
	case nil:
		buf = append(buf, "null"...)
	case bool:
		buf = strconv.AppendBool(buf, x)
	case string:
		buf = appendJSONString(buf, x)
	case int64:
		buf = strconv.AppendInt(buf, x, 10)
	case int:
		buf = strconv.AppendInt(buf, int64(x), 10)
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return nil, &json.UnsupportedValueError{Str: strconv.FormatFloat(x, 'g', -1, 64)}
		}
		if x == math.Trunc(x) {
			buf = strconv.AppendFloat(buf, x, 'f', 1, 64)
		} else {
			buf = strconv.AppendFloat(buf, x, 'g', -1, 64)
		}
	case map[string]any:
		buf = append(buf, '{')
		first := true
		for k, e := range x {
			if !first {
				buf = append(buf, ',')
			}
			first = false
			buf = appendJSONString(buf, k)
			buf = append(buf, ':')
			if buf, err = appendJSON(buf, e); err != nil {
				return nil, err
			}
		}
		buf = append(buf, '}')
	case []any:
		buf = append(buf, '[')
		for i, e := range x {
			if i > 0 {
				buf = append(buf, ',')
			}
			if buf, err = appendJSON(buf, e); err != nil {
				return nil, err
			}
		}
		buf = append(buf, ']')
	default:
		b, err := json.Marshal(x)
		if err != nil {
			return nil, err
		}
		buf = append(buf, b...)
	}
	return buf, nil
}

// appendJSONString appends s as a JSON string: quotes, backslashes and
// control characters escaped, invalid UTF-8 replaced by U+FFFD (as
// encoding/json does).
func appendJSONString(buf []byte, s string) []byte {
	const hex = "0123456789abcdef"
	buf = append(buf, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			buf = append(buf, s[start:i]...)
			switch c {
			case '"', '\\':
				buf = append(buf, '\\', c)
			case '\n':
				buf = append(buf, '\\', 'n')
			case '\r':
				buf = append(buf, '\\', 'r')
			case '\t':
				buf = append(buf, '\\', 't')
			default:
				buf = append(buf, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			buf = append(buf, s[start:i]...)
			buf = append(buf, `\ufffd`...)
			i += size
			start = i
			continue
		}
		i += size
	}
	buf = append(buf, s[start:]...)
	return append(buf, '"')
}
