package remote_test

import (
	"context"
	"io"
	"testing"
	"time"

	"github.com/charmbracelet/log"

	"github.com/tailplane/tailplane/plugins"
	"github.com/tailplane/tailplane/plugins/host"
	"github.com/tailplane/tailplane/plugins/internal/wasmbuild"
	"github.com/tailplane/tailplane/plugins/remote"
	"github.com/tailplane/tailplane/plugins/sdk/abi"
	"github.com/tailplane/tailplane/plugins/source"
)

// BenchmarkFetchCompile measures what it takes to get the canary example (a
// Go guest, ~3 MB) from a registry to a loaded plugin (compiled, one
// instance ready), for docs/performance.md:
//
//   - cold: what the operator does for a new digest: pull from the registry
//     (in-process, over loopback HTTP), check the digest, compile with an
//     empty compilation cache.
//   - cached: what a restarted proxy does for a digest it ran before: the
//     module from its disk cache by digest (no API server, no registry),
//     the compilation from wazero's file cache.
//
// go test -run='^$' -bench=FetchCompile -benchtime=5x -count=3 ./plugins/remote/
func BenchmarkFetchCompile(b *testing.B) {
	mod := wasmbuild.Go(b, "./plugins/examples/canary")
	sum := host.Digest(mod)
	reg := newRegistry(b, false)
	ref := reg + "/plugins/canary:v1"
	if _, err := remote.Push(context.Background(), ref, mod, remote.PushOptions{Keychain: puller}); err != nil {
		b.Fatal(err)
	}
	load := func(b *testing.B, e *host.Engine, m []byte) {
		p, err := e.Load(context.Background(), host.Config{Name: "canary", Module: m, SHA256: sum, Capabilities: []abi.Capability{abi.CapRoute}, PluginConfig: []byte("{}")})
		if err != nil {
			b.Fatal(err)
		}
		_ = p.Close(context.Background())
	}
	b.Run("cold", func(b *testing.B) {
		var fetch time.Duration
		for b.Loop() {
			start := time.Now()
			got, err := remote.FetchOCI(context.Background(), ref, remote.Options{SHA256: sum})
			if err != nil {
				b.Fatal(err)
			}
			fetch += time.Since(start)
			e, err := host.NewEngine(host.EngineOptions{CacheDir: b.TempDir(), Logger: log.New(io.Discard)})
			if err != nil {
				b.Fatal(err)
			}
			load(b, e, got.Bytes)
			_ = e.Close(context.Background())
		}
		b.ReportMetric(float64(fetch.Milliseconds())/float64(b.N), "fetch-ms/op")
		b.ReportMetric(float64(len(mod))/1e6, "MB")
	})
	b.Run("cached", func(b *testing.B) {
		dir := b.TempDir()
		spec := plugins.Spec{
			Config: host.Config{Name: "apps/canary", SHA256: sum, Capabilities: []abi.Capability{abi.CapRoute}, PluginConfig: []byte("{}")},
			// Never read: the module comes from the disk cache.
			Source: &source.Ref{Kind: source.Secret, Namespace: "tailscale", Name: "unused", Key: "module.wasm.gz", SHA256: sum},
		}
		// Warm the caches as a first proxy run does (the module cache is
		// filled by a fetch; here the first manager is handed the bytes).
		warm, err := plugins.New(plugins.Options{CacheDir: dir, Logger: log.New(io.Discard)})
		if err != nil {
			b.Fatal(err)
		}
		first := spec
		first.Module, first.Source = mod, nil
		if st := warm.Apply(context.Background(), []plugins.Spec{first}); !st[0].Loaded {
			b.Fatal(st[0].Error)
		}
		_ = warm.Close(context.Background())
		if err := plugins.SeedModuleCache(dir, mod); err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			m, err := plugins.New(plugins.Options{CacheDir: dir, Logger: log.New(io.Discard)})
			if err != nil {
				b.Fatal(err)
			}
			if st := m.Apply(context.Background(), []plugins.Spec{spec}); !st[0].Loaded {
				b.Fatal(st[0].Error)
			}
			_ = m.Close(context.Background())
		}
	})
}
