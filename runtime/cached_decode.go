package runtime

import (
	"errors"
	"fmt"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// decodeJSONObject parses a JSON object into the value tree apimachinery
// decodes into (k8s.io/apimachinery/pkg/util/json): maps, slices, strings,
// int64 for a number that parses as one, float64 for any other, bools and
// nil. Every read of the informers' cache runs it, so it parses in one pass
// without reflection or json.Number; FuzzMemoryCachedDecode holds it to
// apimachinery's result.
func decodeJSONObject(data []byte) (map[string]any, error) {
	d := jsonDecoder{data: data}
	d.space()
	if d.pos >= len(d.data) || d.data[d.pos] != '{' {
		return nil, d.fail("an object")
	}
	obj, err := d.object()
	if err != nil {
		return nil, err
	}
	d.space()
	if d.pos != len(d.data) {
		return nil, d.fail("the end")
	}
	return obj, nil
}

type jsonDecoder struct {
	data []byte
	pos  int
}

var errJSONDepth = errors.New("json: nested too deep")

// maxJSONDepth bounds nesting as encoding/json does (10,000), so that a
// pathological object cannot exhaust the stack.
const maxJSONDepth = 10000

func (d *jsonDecoder) fail(want string) error {
	if d.pos >= len(d.data) {
		return fmt.Errorf("json: unexpected end, want %s", want)
	}
	return fmt.Errorf("json: unexpected %q at offset %d, want %s", d.data[d.pos], d.pos, want)
}

func (d *jsonDecoder) space() {
	for d.pos < len(d.data) {
		switch d.data[d.pos] {
		case ' ', '\t', '\n', '\r':
			d.pos++
		default:
			return
		}
	}
}

func (d *jsonDecoder) value(depth int) (any, error) {
	d.space()
	if d.pos >= len(d.data) {
		return nil, d.fail("a value")
	}
	switch c := d.data[d.pos]; {
	case c == '{':
		if depth > maxJSONDepth {
			return nil, errJSONDepth
		}
		return d.objectAt(depth + 1)
	case c == '[':
		if depth > maxJSONDepth {
			return nil, errJSONDepth
		}
		return d.array(depth + 1)
	case c == '"':
		return d.str()
	case c == '-' || (c >= '0' && c <= '9'):
		return d.number()
	case d.literal("true"):
		return true, nil
	case d.literal("false"):
		return false, nil
	case d.literal("null"):
		return nil, nil
	}
	return nil, d.fail("a value")
}

func (d *jsonDecoder) literal(word string) bool {
	if len(d.data)-d.pos >= len(word) && string(d.data[d.pos:d.pos+len(word)]) == word {
		d.pos += len(word)
		return true
	}
	return false
}

func (d *jsonDecoder) object() (map[string]any, error) { return d.objectAt(1) }

func (d *jsonDecoder) objectAt(depth int) (map[string]any, error) {
	d.pos++ // {
	obj := map[string]any{}
	d.space()
	if d.pos < len(d.data) && d.data[d.pos] == '}' {
		d.pos++
		return obj, nil
	}
	for {
		d.space()
		if d.pos >= len(d.data) || d.data[d.pos] != '"' {
			return nil, d.fail("a key")
		}
		key, err := d.key()
		if err != nil {
			return nil, err
		}
		d.space()
		if d.pos >= len(d.data) || d.data[d.pos] != ':' {
			return nil, d.fail("':'")
		}
		d.pos++
		v, err := d.value(depth)
		if err != nil {
			return nil, err
		}
		obj[key] = v
		d.space()
		if d.pos >= len(d.data) {
			return nil, d.fail("',' or '}'")
		}
		switch d.data[d.pos] {
		case ',':
			d.pos++
		case '}':
			d.pos++
			return obj, nil
		default:
			return nil, d.fail("',' or '}'")
		}
	}
}

func (d *jsonDecoder) array(depth int) ([]any, error) {
	d.pos++ // [
	arr := []any{}
	d.space()
	if d.pos < len(d.data) && d.data[d.pos] == ']' {
		d.pos++
		return arr, nil
	}
	for {
		v, err := d.value(depth)
		if err != nil {
			return nil, err
		}
		arr = append(arr, v)
		d.space()
		if d.pos >= len(d.data) {
			return nil, d.fail("',' or ']'")
		}
		switch d.data[d.pos] {
		case ',':
			d.pos++
		case ']':
			d.pos++
			return arr, nil
		default:
			return nil, d.fail("',' or ']'")
		}
	}
}

// key reads an object's key. The field names every object has come
// without an allocation: a switch on string(bytes) does not copy.
func (d *jsonDecoder) key() (string, error) {
	end := d.pos + 1
	for end < len(d.data) && d.data[end] != '"' && d.data[end] != '\\' {
		end++
	}
	if end < len(d.data) && d.data[end] == '"' {
		if k, ok := commonKey(d.data[d.pos+1 : end]); ok {
			d.pos = end + 1
			return k, nil
		}
	}
	return d.str()
}

// str reads a string: as it stands when it has no escape and is valid
// UTF-8 (nearly always), else unescaped with invalid UTF-8 and lone
// surrogates replaced by U+FFFD, as encoding/json does.
func (d *jsonDecoder) str() (string, error) {
	d.pos++ // "
	start := d.pos
	for d.pos < len(d.data) {
		c := d.data[d.pos]
		switch {
		case c == '"':
			s := string(d.data[start:d.pos])
			d.pos++
			return s, nil
		case c == '\\' || c < 0x20:
			return d.strSlow(start)
		case c < utf8.RuneSelf:
			d.pos++
		default:
			r, size := utf8.DecodeRune(d.data[d.pos:])
			if r == utf8.RuneError && size == 1 {
				return d.strSlow(start)
			}
			d.pos += size
		}
	}
	return "", d.fail(`'"'`)
}

func (d *jsonDecoder) strSlow(start int) (string, error) {
	out := make([]byte, 0, d.pos-start+16)
	out = append(out, d.data[start:d.pos]...)
	for d.pos < len(d.data) {
		c := d.data[d.pos]
		switch {
		case c == '"':
			d.pos++
			return string(out), nil
		case c < 0x20:
			return "", d.fail("no control character in a string")
		case c == '\\':
			d.pos++
			if d.pos >= len(d.data) {
				return "", d.fail("an escape")
			}
			e := d.data[d.pos]
			d.pos++
			switch e {
			case '"', '\\', '/':
				out = append(out, e)
			case 'b':
				out = append(out, '\b')
			case 'f':
				out = append(out, '\f')
			case 'n':
				out = append(out, '\n')
			case 'r':
				out = append(out, '\r')
			case 't':
				out = append(out, '\t')
			case 'u':
				r, ok := d.hex4()
				if !ok {
					return "", d.fail("four hex digits")
				}
				if utf16.IsSurrogate(r) {
					r2, ok2 := rune(-1), false
					if len(d.data)-d.pos >= 6 && d.data[d.pos] == '\\' && d.data[d.pos+1] == 'u' {
						save := d.pos
						d.pos += 2
						if r2, ok2 = d.hex4(); !ok2 {
							return "", d.fail("four hex digits")
						}
						if dec := utf16.DecodeRune(r, r2); dec != utf8.RuneError {
							out = utf8.AppendRune(out, dec)
							continue
						}
						d.pos = save // not a pair: the second escape stands alone
					}
					r = utf8.RuneError
				}
				out = utf8.AppendRune(out, r)
			default:
				d.pos--
				return "", d.fail("an escape")
			}
		case c < utf8.RuneSelf:
			out = append(out, c)
			d.pos++
		default:
			r, size := utf8.DecodeRune(d.data[d.pos:])
			d.pos += size
			out = utf8.AppendRune(out, r) // RuneError for invalid UTF-8
		}
	}
	return "", d.fail(`'"'`)
}

func (d *jsonDecoder) hex4() (rune, bool) {
	if len(d.data)-d.pos < 4 {
		return 0, false
	}
	var r rune
	for _, c := range d.data[d.pos : d.pos+4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			c = c - 'A' + 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	d.pos += 4
	return r, true
}

// number reads a number as apimachinery converts it: int64 when it parses
// as one, else float64.
func (d *jsonDecoder) number() (any, error) {
	start := d.pos
	if d.data[d.pos] == '-' {
		d.pos++
	}
	digits := d.pos
	for d.pos < len(d.data) && d.data[d.pos] >= '0' && d.data[d.pos] <= '9' {
		d.pos++
	}
	if d.pos == digits || (d.data[digits] == '0' && d.pos-digits > 1) {
		return nil, d.fail("a number")
	}
	integer := true
	if d.pos < len(d.data) && d.data[d.pos] == '.' {
		integer = false
		d.pos++
		frac := d.pos
		for d.pos < len(d.data) && d.data[d.pos] >= '0' && d.data[d.pos] <= '9' {
			d.pos++
		}
		if d.pos == frac {
			return nil, d.fail("a digit")
		}
	}
	if d.pos < len(d.data) && (d.data[d.pos] == 'e' || d.data[d.pos] == 'E') {
		integer = false
		d.pos++
		if d.pos < len(d.data) && (d.data[d.pos] == '+' || d.data[d.pos] == '-') {
			d.pos++
		}
		exp := d.pos
		for d.pos < len(d.data) && d.data[d.pos] >= '0' && d.data[d.pos] <= '9' {
			d.pos++
		}
		if d.pos == exp {
			return nil, d.fail("a digit")
		}
	}
	lit := d.data[start:d.pos]
	if integer && d.pos-digits <= 18 {
		// Fits in an int64 without overflow: no string, no allocation.
		var n int64
		for _, c := range d.data[digits:d.pos] {
			n = n*10 + int64(c-'0')
		}
		if start != digits {
			n = -n
		}
		return n, nil
	}
	if integer {
		if n, err := strconv.ParseInt(string(lit), 10, 64); err == nil {
			return n, nil
		}
	}
	f, err := strconv.ParseFloat(string(lit), 64)
	if err != nil {
		return nil, fmt.Errorf("json: number %s: %w", lit, err)
	}
	return f, nil
}
