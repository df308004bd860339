package host

import "fmt"

// reader decodes the parts of the binary format the rewrite needs; the
// first error sticks.
type reader struct {
	b   []byte
	i   int
	err error
}

func (r *reader) fail(format string, args ...any) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: "+format, append([]any{errInstrument}, args...)...)
	}
	r.i = len(r.b)
}

func (r *reader) byte() byte {
	if r.i >= len(r.b) {
		r.fail("truncated")
		return 0
	}
	r.i++
	return r.b[r.i-1]
}

func (r *reader) bytes(n int) []byte {
	if n < 0 || r.i+n > len(r.b) {
		r.fail("truncated")
		return nil
	}
	r.i += n
	return r.b[r.i-n : r.i]
}

// leb reads an (un)signed LEB128 and returns it sign-extended if signed.
func (r *reader) leb(signed bool) int64 {
	var v uint64
	var shift uint
	for {
		c := r.byte()
		if r.err != nil || shift > 63 {
			r.fail("bad LEB128")
			return 0
		}
		v |= uint64(c&0x7F) << shift
		shift += 7
		if c&0x80 == 0 {
			if signed && shift < 64 && c&0x40 != 0 {
				v |= ^uint64(0) << shift
			}
			return int64(v)
		}
	}
}

func (r *reader) u32() uint32  { return uint32(r.leb(false)) }
func (r *reader) name() string { return string(r.bytes(int(r.u32()))) }

// valtype reads a value type, including (ref null? ht).
func (r *reader) valtype() {
	if t := r.byte(); t == 0x63 || t == 0x64 {
		r.leb(true)
	}
}

func (r *reader) blocktype() {
	if t := r.leb(true); t == -29 || t == -28 { // 0x63, 0x64: a reference type
		r.leb(true)
	}
}

func (r *reader) limits() {
	flags := r.byte()
	r.leb(false)
	if flags&1 != 0 {
		r.leb(false)
	}
}

func (r *reader) memarg() {
	if align := r.u32(); align&0x40 != 0 {
		r.u32() // memory index
	}
	r.leb(false)
}

// immediates skips the immediates of op.
func (r *reader) immediates(op byte) {
	switch {
	case op == 0x02 || op == 0x03 || op == 0x04 || op == 0x06:
		r.blocktype()
	case op == 0x07 || op == 0x08 || op == 0x09 || op == 0x18 || op == 0x0C || op == 0x0D ||
		op == 0x10 || op == 0x12 || op == 0x14 || op == 0x15 || (op >= 0x20 && op <= 0x26) ||
		op == 0x3F || op == 0x40 || op == 0xD2 || op == 0xD5 || op == 0xD6:
		r.u32()
	case op == 0x0E:
		for n := r.u32(); n > 0 && r.err == nil; n-- {
			r.u32()
		}
		r.u32()
	case op == 0x11 || op == 0x13:
		r.u32()
		r.u32()
	case op == 0x1C:
		for n := r.u32(); n > 0 && r.err == nil; n-- {
			r.valtype()
		}
	case op == 0x1F:
		r.blocktype()
		for n := r.u32(); n > 0 && r.err == nil; n-- {
			if k := r.byte(); k < 2 {
				r.u32()
			}
			r.u32()
		}
	case op >= 0x28 && op <= 0x3E:
		r.memarg()
	case op == 0x41 || op == 0x42 || op == 0xD0:
		r.leb(true)
	case op == 0x43:
		r.bytes(4)
	case op == 0x44:
		r.bytes(8)
	case op == 0xFC:
		r.prefixFC(r.u32())
	case op == 0xFD:
		r.prefixFD(r.u32())
	case op == 0xFE:
		if r.u32() == 3 { // atomic.fence
			r.byte()
		} else {
			r.memarg()
		}
	case op <= 0x01 || op == 0x05 || op == 0x0A || op == 0x0B || op == 0x0F || op == 0x19 ||
		op == 0x1A || op == 0x1B || (op >= 0x45 && op <= 0xC4) || op == 0xD1 || op == 0xD3 || op == 0xD4:
	default:
		r.fail("opcode 0x%02x at %d", op, r.i-1)
	}
}

func (r *reader) prefixFC(sub uint32) {
	switch {
	case sub <= 7:
	case sub == 8 || sub == 10 || sub == 12 || sub == 14:
		r.u32()
		r.u32()
	case sub == 9 || sub == 11 || sub == 13 || (sub >= 15 && sub <= 17):
		r.u32()
	default:
		r.fail("opcode 0xfc %d", sub)
	}
}

func (r *reader) prefixFD(sub uint32) {
	switch {
	case sub <= 11 || sub == 92 || sub == 93:
		r.memarg()
	case sub == 12 || sub == 13:
		r.bytes(16)
	case sub >= 21 && sub <= 34:
		r.byte()
	case sub >= 84 && sub <= 91:
		r.memarg()
		r.byte()
	case sub <= 0x113:
	default:
		r.fail("opcode 0xfd %d", sub)
	}
}
