package host

import (
	"context"
	"fmt"
	"strings"

	"github.com/tetratelabs/wazero/api"
)

// exchangeKey carries the *exchange of the current call in its context.
type exchangeKey struct{}

func exchangeFrom(ctx context.Context) *exchange {
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

// writeList writes NUL-terminated values and returns count<<32|len.
func writeList(mod api.Module, buf, limit uint32, values []string) uint64 {
	if len(values) == 0 {
		return 0
	}
	var sb strings.Builder
	for _, v := range values {
		sb.WriteString(v)
		sb.WriteByte(0)
	}
	n := writeIfFits(mod, buf, limit, sb.String())
	return uint64(len(values))<<32 | n
}
