package host

import (
	"context"
	"fmt"

	"github.com/charmbracelet/log"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"github.com/tailplane/tailplane/plugins/sdk/abi"
)

const (
	i32 = api.ValueTypeI32
	i64 = api.ValueTypeI64
)

// httpFunction is one host function of the http_handler module.
type httpFunction struct {
	name    string
	params  []api.ValueType
	results []api.ValueType
	fn      api.GoModuleFunc
}

// httpFunctions implements every function of the http-wasm http_handler ABI
// (https://http-wasm.io/http-handler-abi). Errors trap the guest.
func httpFunctions() []httpFunction {
	return []httpFunction{
		{"enable_features", []api.ValueType{i32}, []api.ValueType{i32}, enableFeatures},
		{"get_config", []api.ValueType{i32, i32}, []api.ValueType{i32}, func(ctx context.Context, mod api.Module, s []uint64) {
			x := exchangeFrom(ctx)
			s[0] = writeIfFits(mod, api.DecodeU32(s[0]), api.DecodeU32(s[1]), string(x.plugin.cfg.PluginConfig))
		}},
		{"log", []api.ValueType{i32, i32, i32}, nil, guestLog},
		{"log_enabled", []api.ValueType{i32}, []api.ValueType{i32}, func(ctx context.Context, _ api.Module, s []uint64) {
			x := exchangeFrom(ctx)
			level := api.DecodeI32(s[0])
			s[0] = 0
			if level < abi.LogNone && x.plugin.log.GetLevel() <= guestLevel(level) {
				s[0] = 1
			}
		}},
		{"get_method", []api.ValueType{i32, i32}, []api.ValueType{i32}, func(ctx context.Context, mod api.Module, s []uint64) {
			s[0] = writeIfFits(mod, api.DecodeU32(s[0]), api.DecodeU32(s[1]), exchangeFrom(ctx).method)
		}},
		{"set_method", []api.ValueType{i32, i32}, nil, func(ctx context.Context, mod api.Module, s []uint64) {
			x := exchangeFrom(ctx)
			requireBeforeNext(x, "set_method")
			m := readString(mod, api.DecodeU32(s[0]), api.DecodeU32(s[1]))
			if m == "" {
				panic(fmt.Errorf("set_method: empty method"))
			}
			x.method, x.methodChanged = m, true
		}},
		{"get_uri", []api.ValueType{i32, i32}, []api.ValueType{i32}, func(ctx context.Context, mod api.Module, s []uint64) {
			s[0] = writeIfFits(mod, api.DecodeU32(s[0]), api.DecodeU32(s[1]), exchangeFrom(ctx).uri)
		}},
		{"set_uri", []api.ValueType{i32, i32}, nil, func(ctx context.Context, mod api.Module, s []uint64) {
			x := exchangeFrom(ctx)
			requireBeforeNext(x, "set_uri")
			u := readString(mod, api.DecodeU32(s[0]), api.DecodeU32(s[1]))
			if u == "" || u[0] != '/' {
				panic(fmt.Errorf("set_uri: %q does not start with /", u))
			}
			x.uri, x.uriChanged = u, true
		}},
		{"get_protocol_version", []api.ValueType{i32, i32}, []api.ValueType{i32}, func(ctx context.Context, mod api.Module, s []uint64) {
			s[0] = writeIfFits(mod, api.DecodeU32(s[0]), api.DecodeU32(s[1]), exchangeFrom(ctx).proto)
		}},
		{"get_source_addr", []api.ValueType{i32, i32}, []api.ValueType{i32}, func(ctx context.Context, mod api.Module, s []uint64) {
			s[0] = writeIfFits(mod, api.DecodeU32(s[0]), api.DecodeU32(s[1]), exchangeFrom(ctx).sourceAddr)
		}},
		{"get_header_names", []api.ValueType{i32, i32, i32}, []api.ValueType{i64}, func(ctx context.Context, mod api.Module, s []uint64) {
			x := exchangeFrom(ctx)
			s[0] = writeList(mod, api.DecodeU32(s[1]), api.DecodeU32(s[2]), x.headerNames(api.DecodeU32(s[0])))
		}},
		{"get_header_values", []api.ValueType{i32, i32, i32, i32, i32}, []api.ValueType{i64}, func(ctx context.Context, mod api.Module, s []uint64) {
			x := exchangeFrom(ctx)
			// The name is only used for the lookup: no copy.
			name := viewString(mod, api.DecodeU32(s[1]), api.DecodeU32(s[2]))
			s[0] = writeList(mod, api.DecodeU32(s[3]), api.DecodeU32(s[4]), x.headerValues(api.DecodeU32(s[0]), name))
		}},
		{"set_header_value", []api.ValueType{i32, i32, i32, i32, i32}, nil, func(ctx context.Context, mod api.Module, s []uint64) {
			editHeader(ctx, mod, s, "set")
		}},
		{"add_header_value", []api.ValueType{i32, i32, i32, i32, i32}, nil, func(ctx context.Context, mod api.Module, s []uint64) {
			editHeader(ctx, mod, s, "add")
		}},
		{"remove_header", []api.ValueType{i32, i32, i32}, nil, func(ctx context.Context, mod api.Module, s []uint64) {
			editHeader(ctx, mod, s, "remove")
		}},
		{"read_body", []api.ValueType{i32, i32, i32}, []api.ValueType{i64}, readBody},
		{"write_body", []api.ValueType{i32, i32, i32}, nil, writeBody},
		{"get_status_code", nil, []api.ValueType{i32}, func(ctx context.Context, _ api.Module, s []uint64) {
			s[0] = api.EncodeU32(uint32(exchangeFrom(ctx).status))
		}},
		{"set_status_code", []api.ValueType{i32}, nil, func(ctx context.Context, _ api.Module, s []uint64) {
			x := exchangeFrom(ctx)
			code := api.DecodeU32(s[0])
			if code < 100 || code > 599 {
				panic(fmt.Errorf("set_status_code: %d is not an HTTP status", code))
			}
			if !x.respWritable {
				panic(fmt.Errorf("set_status_code: the response was already sent (enable buffer_response)"))
			}
			x.status = int(code)
		}},
	}
}

// instantiateHTTPModule adds the http_handler module to r.
func instantiateHTTPModule(ctx context.Context, r wazero.Runtime) error {
	b := r.NewHostModuleBuilder(abi.HTTPModule)
	for _, f := range httpFunctions() {
		b.NewFunctionBuilder().WithGoModuleFunction(f.fn, f.params, f.results).Export(f.name)
	}
	if _, err := b.Instantiate(ctx); err != nil {
		return fmt.Errorf("instantiate %s host module: %w", abi.HTTPModule, err)
	}
	return nil
}

func enableFeatures(ctx context.Context, _ api.Module, s []uint64) {
	x := exchangeFrom(ctx)
	f := api.DecodeU32(s[0])
	if x.inInit {
		// Enabled during init: applies to every request on this instance.
		x.inst.features |= f
	}
	x.features |= f
	s[0] = api.EncodeU32(x.features)
}

func guestLevel(level int32) log.Level {
	switch {
	case level <= abi.LogDebug:
		return log.DebugLevel
	case level == abi.LogInfo:
		return log.InfoLevel
	case level == abi.LogWarn:
		return log.WarnLevel
	}
	return log.ErrorLevel
}

func guestLog(ctx context.Context, mod api.Module, s []uint64) {
	x := exchangeFrom(ctx)
	level := api.DecodeI32(s[0])
	if level >= abi.LogNone {
		return
	}
	// Logging never traps: a bad pointer just drops the message.
	b, ok := mod.Memory().Read(api.DecodeU32(s[1]), api.DecodeU32(s[2]))
	if !ok {
		return
	}
	x.plugin.log.Log(guestLevel(level), "guest: "+string(b))
}

func requireBeforeNext(x *exchange, fn string) {
	if x.afterNext {
		panic(fmt.Errorf("%s: called after the request was sent to the next handler", fn))
	}
}

func editHeader(ctx context.Context, mod api.Module, s []uint64, op string) {
	x := exchangeFrom(ctx)
	kind := api.DecodeU32(s[0])
	name := readString(mod, api.DecodeU32(s[1]), api.DecodeU32(s[2]))
	if name == "" {
		panic(fmt.Errorf("%s header: empty name", op))
	}
	if kind > abi.HeaderResponseTrailer {
		panic(fmt.Errorf("%s header: unknown kind %d", op, kind))
	}
	if kind == abi.HeaderRequest || kind == abi.HeaderRequestTrailer {
		requireBeforeNext(x, op+" request header")
	}
	h := x.mutableHeaders(kind, name)
	if h == nil {
		panic(fmt.Errorf("%s header %q: the response was already sent (enable buffer_response)", op, name))
	}
	if kind == abi.HeaderRequest && (name == "host" || name == "Host" || name == "HOST") {
		// The authority decides routing, which already happened.
		panic(fmt.Errorf("%s header: Host cannot be changed by a plugin", op))
	}
	switch op {
	case "set":
		h.Set(name, readString(mod, api.DecodeU32(s[3]), api.DecodeU32(s[4])))
	case "add":
		h.Add(name, readString(mod, api.DecodeU32(s[3]), api.DecodeU32(s[4])))
	default:
		h.Del(name)
	}
}

func readBody(ctx context.Context, mod api.Module, s []uint64) {
	x := exchangeFrom(ctx)
	kind, buf, limit := api.DecodeU32(s[0]), api.DecodeU32(s[1]), api.DecodeU32(s[2])
	if limit == 0 {
		s[0] = 0
		return
	}
	p, ok := mod.Memory().Read(buf, limit)
	if !ok {
		panic(fmt.Errorf("read_body: out of range buffer"))
	}
	var n int
	var eof bool
	switch kind {
	case abi.BodyRequest:
		if x.afterNext && x.features&abi.FeatureBufferRequest == 0 {
			panic(fmt.Errorf("read_body: request body already sent (enable buffer_request)"))
		}
		n, eof = x.readRequestBody(p)
	case abi.BodyResponse:
		if !x.afterNext || x.features&abi.FeatureBufferResponse == 0 {
			panic(fmt.Errorf("read_body: response body is only readable after next with buffer_response"))
		}
		n, eof = x.readResponseBody(p)
	default:
		panic(fmt.Errorf("read_body: unknown kind %d", kind))
	}
	var e uint64
	if eof {
		e = 1
	}
	s[0] = e<<32 | uint64(n)
}

func writeBody(ctx context.Context, mod api.Module, s []uint64) {
	x := exchangeFrom(ctx)
	kind := api.DecodeU32(s[0])
	b, ok := mod.Memory().Read(api.DecodeU32(s[1]), api.DecodeU32(s[2]))
	if !ok {
		panic(fmt.Errorf("write_body: out of range buffer"))
	}
	switch kind {
	case abi.BodyRequest:
		requireBeforeNext(x, "write_body(request)")
		// The guest replaces the request body.
		x.reqBody, x.reqBodyEOF = nil, true
		if x.reqBodyConsumed == 0 || !x.reqBodyRewritten {
			x.reqBodyBuf, x.reqBodyRewritten = nil, true
		}
		x.reqBodyBuf = append(x.reqBodyBuf, b...)
		x.reqBodyConsumed = len(x.reqBodyBuf)
	case abi.BodyResponse:
		if !x.writeResponseBody(b) {
			panic(fmt.Errorf("write_body: response already sent or larger than %d bytes", maxResponseBody))
		}
	default:
		panic(fmt.Errorf("write_body: unknown kind %d", kind))
	}
}
