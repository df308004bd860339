package host

import (
	"context"
	"io"
	"testing"
	"time"

	"github.com/charmbracelet/log"

	"github.com/tailplane/tailplane/plugins/abi"
	"github.com/tailplane/tailplane/plugins/internal/wasmbuild"
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
