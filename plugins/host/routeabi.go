package host

import (
	"context"
	"fmt"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"github.com/tailplane/tailplane/plugins/sdk/abi"
)

// routeFunctions implements tailplane_route_v1. Unlike http_handler, its
// setters never trap on a refused request: they return abi.StatusNotAllowed
// so a guest can fall back.
func routeFunctions() []httpFunction {
	return []httpFunction{
		{abi.FnABIVersion, nil, []api.ValueType{i32}, func(_ context.Context, _ api.Module, s []uint64) {
			s[0] = api.EncodeI32(abi.RouteVersion)
		}},
		stringGetter(abi.FnGetRouteHost, func(x *exchange) string {
			if x.route == nil {
				return ""
			}
			return x.route.Host
		}),
		stringGetter(abi.FnGetRoutePath, func(x *exchange) string {
			if x.route == nil {
				return ""
			}
			return x.route.Path
		}),
		{abi.FnGetBackends, []api.ValueType{i32, i32}, []api.ValueType{i64}, func(ctx context.Context, mod api.Module, s []uint64) {
			x := exchangeFrom(ctx)
			s[0] = writeList(mod, api.DecodeU32(s[0]), api.DecodeU32(s[1]), x.backendNames())
		}},
		{abi.FnSetBackend, []api.ValueType{i32, i32}, []api.ValueType{i32}, func(ctx context.Context, mod api.Module, s []uint64) {
			x := exchangeFrom(ctx)
			name := readString(mod, api.DecodeU32(s[0]), api.DecodeU32(s[1]))
			if x.afterNext || !x.setBackend(name) {
				x.backendRejected = true
				x.plugin.log.Warn("set_backend refused: not on the route's allowlist", "backend", name, "allowed", x.backendNames())
				s[0] = api.EncodeI32(abi.StatusNotAllowed)
				return
			}
			s[0] = api.EncodeI32(abi.StatusOK)
		}},
		stringGetter(abi.FnGetLogin, func(x *exchange) string {
			if x.identity == nil {
				return ""
			}
			return x.identity.LoginName
		}),
		stringGetter(abi.FnGetNode, func(x *exchange) string {
			if x.identity == nil {
				return ""
			}
			return x.identity.NodeName
		}),
		{abi.FnGetTags, []api.ValueType{i32, i32}, []api.ValueType{i64}, func(ctx context.Context, mod api.Module, s []uint64) {
			x := exchangeFrom(ctx)
			var tags []string
			if x.identity != nil {
				tags = x.identity.Tags
			}
			s[0] = writeList(mod, api.DecodeU32(s[0]), api.DecodeU32(s[1]), tags)
		}},
		{abi.FnIsPublic, nil, []api.ValueType{i32}, func(ctx context.Context, _ api.Module, s []uint64) {
			s[0] = 0
			if exchangeFrom(ctx).public {
				s[0] = 1
			}
		}},
		{abi.FnSetFunnel, []api.ValueType{i32}, []api.ValueType{i32}, func(ctx context.Context, _ api.Module, s []uint64) {
			x := exchangeFrom(ctx)
			if api.DecodeI32(s[0]) != abi.FunnelDeny {
				// Exposure is the operator's to grant; a plugin may only narrow it.
				x.funnelWidenRejected = true
				x.plugin.log.Warn("set_funnel refused: a plugin can only narrow Funnel exposure")
				s[0] = api.EncodeI32(abi.StatusNotAllowed)
				return
			}
			x.denyPublic = true
			s[0] = api.EncodeI32(abi.StatusOK)
		}},
	}
}

// instantiateRouteModule adds tailplane_route_v1 to r with only the functions
// cfg's capabilities grant.
func instantiateRouteModule(ctx context.Context, r wazero.Runtime, cfg Config) error {
	b := r.NewHostModuleBuilder(abi.RouteModule)
	for _, f := range routeFunctions() {
		if cp, _ := abi.CapabilityOf(f.name); cfg.grants(cp) {
			b.NewFunctionBuilder().WithGoModuleFunction(f.fn, f.params, f.results).Export(f.name)
		}
	}
	if _, err := b.Instantiate(ctx); err != nil {
		return fmt.Errorf("instantiate %s host module: %w", abi.RouteModule, err)
	}
	return nil
}

// stringGetter is a routing-module function that copies one string of the
// request's exchange into the guest's buffer (the size when it does not fit).
func stringGetter(name string, get func(x *exchange) string) httpFunction {
	return httpFunction{name, []api.ValueType{i32, i32}, []api.ValueType{i32}, func(ctx context.Context, mod api.Module, s []uint64) {
		s[0] = writeIfFits(mod, api.DecodeU32(s[0]), api.DecodeU32(s[1]), get(exchangeFrom(ctx)))
	}}
}
