package host

import (
	"context"
	"fmt"
	"unsafe"

	"github.com/tetratelabs/wazero/api"
)

// exchangeKey carries the *exchange of the current call in its context.
type exchangeKey struct{}

// callCtx is the context of one guest call: it carries the exchange
// without a context.WithValue chain, so host functions find it with one
// type assertion.
type callCtx struct {
	context.Context
	x *exchange
}

// Value implements context.Context.
func (c *callCtx) Value(key any) any {
	if _, ok := key.(exchangeKey); ok {
		return c.x
	}
	return c.Context.Value(key)
}

func exchangeFrom(ctx context.Context) *exchange {
	if c, ok := ctx.(*callCtx); ok {
		return c.x
	}
	x, _ := ctx.Value(exchangeKey{}).(*exchange)
	if x == nil {
		// Only reachable if wazero calls a host function outside our calls.
		panic(fmt.Errorf("host function called outside a plugin call"))
	}
	return x
}

// readString copies length bytes at ptr out of the guest's memory. An out of
// range pointer traps the guest, as the http-wasm spec requires.
func readString(mod api.Module, ptr, length uint32) string {
	b, ok := mod.Memory().Read(ptr, length)
	if !ok {
		panic(fmt.Errorf("out of range memory read: %d bytes at %d", length, ptr))
	}
	return string(b)
}

// writeIfFits writes data at buf when it fits in limit and returns its length
// either way, so a guest can size its buffer with a first call.
func writeIfFits(mod api.Module, buf, limit uint32, data string) uint64 {
	n := uint32(len(data))
	if n > 0 && n <= limit {
		b, ok := mod.Memory().Read(buf, n)
		if !ok {
			panic(fmt.Errorf("out of range memory write: %d bytes at %d", n, buf))
		}
		copy(b, data)
	}
	return uint64(n)
}

// writeList writes NUL-terminated values straight into the guest's memory
// and returns count<<32|len.
func writeList(mod api.Module, buf, limit uint32, values []string) uint64 {
	if len(values) == 0 {
		return 0
	}
	n := 0
	for _, v := range values {
		n += len(v) + 1
	}
	if n <= int(limit) {
		b, ok := mod.Memory().Read(buf, uint32(n))
		if !ok {
			panic(fmt.Errorf("out of range memory write: %d bytes at %d", n, buf))
		}
		i := 0
		for _, v := range values {
			i += copy(b[i:], v)
			b[i] = 0
			i++
		}
	}
	return uint64(len(values))<<32 | uint64(n)
}

// viewString returns guest memory as a string without copying. It is only
// valid during the host call (the guest is paused) and must not be kept.
func viewString(mod api.Module, ptr, length uint32) string {
	if length == 0 {
		return ""
	}
	b, ok := mod.Memory().Read(ptr, length)
	if !ok {
		panic(fmt.Errorf("out of range memory read: %d bytes at %d", length, ptr))
	}
	return unsafe.String(&b[0], len(b))
}
