package host

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"github.com/tailplane/tailplane/plugins/sdk/abi"
)

var wasmMagic = []byte("\x00asm")

// compile compiles cfg.Module in r and checks it against what the host
// offers, so every mismatch is a load error naming the function at fault.
// module is cfg.Module as it is compiled (instrumented or not).
func compile(ctx context.Context, r wazero.Runtime, cfg Config, module []byte) (wazero.CompiledModule, error) {
	if !bytes.HasPrefix(cfg.Module, wasmMagic) {
		return nil, fmt.Errorf("plugin %s: %w: %d bytes without the \\0asm header", cfg.Name, ErrNotWasm, len(cfg.Module))
	}
	cm, err := r.CompileModule(ctx, module)
	if err != nil && isCacheError(err) {
		return nil, fmt.Errorf("plugin %s: %w: %v", cfg.Name, ErrCache, err)
	}
	if err != nil {
		return nil, fmt.Errorf("plugin %s: %w: %v", cfg.Name, ErrNotWasm, err)
	}
	if err := checkImports(cm, cfg); err != nil {
		_ = cm.Close(ctx)
		return nil, err
	}
	if err := checkExports(cm, cfg.Name); err != nil {
		_ = cm.Close(ctx)
		return nil, err
	}
	return cm, nil
}

func checkImports(cm wazero.CompiledModule, cfg Config) error {
	httpNames := map[string]bool{}
	for _, f := range httpFunctions() {
		httpNames[f.name] = true
	}
	for _, def := range cm.ImportedFunctions() {
		module, name, _ := def.Import()
		switch {
		case module == abi.HTTPModule:
			if !httpNames[name] {
				return fmt.Errorf("plugin %s: %w: imports %s.%s, which this host's http-wasm ABI does not have", cfg.Name, ErrABIVersion, module, name)
			}
		case module == abi.RouteModule:
			cp, ok := abi.CapabilityOf(name)
			if !ok {
				return fmt.Errorf("plugin %s: %w: imports %s.%s, which does not exist in %s", cfg.Name, ErrABIVersion, module, name, abi.RouteModule)
			}
			if !cfg.grants(cp) {
				return fmt.Errorf("plugin %s: %w: imports %s.%s, which needs capability %q; add it to the plugin's capabilities", cfg.Name, ErrCapability, module, name, cp)
			}
		case strings.HasPrefix(module, abi.RouteModulePrefix):
			return fmt.Errorf("plugin %s: %w: the plugin was built for routing module %s; this host provides %s (version %d)", cfg.Name, ErrABIVersion, module, abi.RouteModule, abi.RouteVersion)
		case module == abi.WASIModule:
		case module == "env" && name == "abort":
			return fmt.Errorf("plugin %s: %w: imports env.abort (AssemblyScript: build with --use abort=)", cfg.Name, ErrUnknownImport)
		default:
			return fmt.Errorf("plugin %s: %w: imports %s.%s; the host offers only %s, %s and %s", cfg.Name, ErrUnknownImport, module, name, abi.HTTPModule, abi.RouteModule, abi.WASIModule)
		}
	}
	if mems := cm.ImportedMemories(); len(mems) > 0 {
		module, name, _ := mems[0].Import()
		return fmt.Errorf("plugin %s: %w: imports memory %s.%s; a plugin must define and export its own", cfg.Name, ErrUnknownImport, module, name)
	}
	return nil
}

func checkExports(cm wazero.CompiledModule, plugin string) error {
	fns := cm.ExportedFunctions()
	want := []struct {
		name            string
		params, results []api.ValueType
	}{
		{abi.ExportHandleRequest, nil, []api.ValueType{api.ValueTypeI64}},
		{abi.ExportHandleResponse, []api.ValueType{api.ValueTypeI32, api.ValueTypeI32}, nil},
	}
	for _, w := range want {
		def, ok := fns[w.name]
		if !ok {
			return fmt.Errorf("plugin %s: %w: function %q is not exported (http-wasm guests export handle_request and handle_response)", plugin, ErrMissingExport, w.name)
		}
		if !slices.Equal(def.ParamTypes(), w.params) || !slices.Equal(def.ResultTypes(), w.results) {
			return fmt.Errorf("plugin %s: %w: %s has signature %s, want %s", plugin, ErrMissingExport, w.name,
				signature(def.ParamTypes(), def.ResultTypes()), signature(w.params, w.results))
		}
	}
	if _, ok := cm.ExportedMemories()[abi.ExportMemory]; !ok {
		return fmt.Errorf("plugin %s: %w: memory %q is not exported", plugin, ErrMissingExport, abi.ExportMemory)
	}
	return nil
}

func signature(params, results []api.ValueType) string {
	name := func(ts []api.ValueType) string {
		s := make([]string, len(ts))
		for i, t := range ts {
			s[i] = api.ValueTypeName(t)
		}
		return "(" + strings.Join(s, ",") + ")"
	}
	return name(params) + "->" + name(results)
}

// startFunctions picks the reactor initialiser: _initialize (Go c-shared,
// AssemblyScript, TinyGo reactors), else _start for older TinyGo guests.
func startFunctions(cm wazero.CompiledModule) []string {
	fns := cm.ExportedFunctions()
	if _, ok := fns["_initialize"]; ok {
		return []string{"_initialize"}
	}
	if _, ok := fns["_start"]; ok {
		return []string{"_start"}
	}
	return nil
}
