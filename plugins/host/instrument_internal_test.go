package host

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/charmbracelet/log"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"github.com/tailplane/tailplane/plugins/internal/wasmbuild"
	"github.com/tailplane/tailplane/plugins/sdk/abi"
)

// Both guest toolchains' modules are instrumented for the watchdog, so
// neither pays for wazero's per-call deadline; a plugin without a deadline
// is not rewritten at all.
func TestGuestsUseTheWatchdog(t *testing.T) {
	e, err := NewEngine(EngineOptions{CacheDir: wasmbuild.CompilationCacheDir(t), Logger: log.NewWithOptions(io.Discard, log.Options{})})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close(context.Background())
	for _, g := range []struct {
		name   string
		module []byte
	}{
		{"go", wasmbuild.Go(t, "./plugins/host/testdata/misbehave")},
		{"assemblyscript", wasmbuild.AssemblyScript(t)},
	} {
		for _, timeout := range []time.Duration{0, -1} {
			p, err := e.Load(context.Background(), Config{Name: g.name, Module: g.module, Timeout: timeout, Capabilities: []abi.Capability{abi.CapRoute, abi.CapFunnel}})
			if err != nil {
				t.Fatal(err)
			}
			if watched := p.watch != nil; watched != (timeout == 0) {
				t.Errorf("%s guest, timeout %v: watchdog = %v", g.name, timeout, watched)
			}
			_ = p.Close(context.Background())
		}
	}
}

// A wasm start section becomes an export the host calls under the
// watchdog, and the rewritten module is valid (wazero compiles it).
func TestInstrumentMovesStartSection(t *testing.T) {
	module := []byte("\x00asm\x01\x00\x00\x00" +
		"\x01\x04\x01\x60\x00\x00" + // type 0: [] -> []
		"\x03\x02\x01\x00" + // func 0: type 0
		"\x05\x03\x01\x00\x01" + // memory: 1 page
		"\x08\x01\x00" + // start: func 0
		"\x0a\x07\x01\x05\x00\x03\x40\x0b\x0b") // func 0: loop end end
	out, hadStart, err := instrument(module)
	if err != nil || !hadStart {
		t.Fatalf("instrument: start=%v, %v", hadStart, err)
	}
	ctx := context.Background()
	r := wazero.NewRuntime(ctx)
	defer r.Close(ctx)
	mod, err := r.InstantiateWithConfig(ctx, out, wazero.NewModuleConfig().WithStartFunctions())
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := mod.ExportedGlobal(stopExport).(api.MutableGlobal); !ok {
		t.Errorf("no mutable %s export", stopExport)
	}
	start := mod.ExportedFunction(startExport)
	if start == nil {
		t.Fatalf("no %s export", startExport)
	}
	if _, err := start.Call(ctx); err != nil {
		t.Errorf("calling the former start function: %v", err)
	}
	// A module the decoder does not understand is refused, so the host
	// falls back to wazero's deadline instead of compiling a broken module.
	bad := append([]byte(nil), module...)
	bad[len(bad)-4] = 0xFF // an opcode that does not exist
	if _, _, err := instrument(bad); !errors.Is(err, errInstrument) {
		t.Errorf("unknown opcode: err = %v, want errInstrument", err)
	}
}
