package host_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/charmbracelet/log"

	"github.com/tailplane/tailplane/internal/syncbuf"
	"github.com/tailplane/tailplane/plugins/host"
	"github.com/tailplane/tailplane/plugins/sdk/abi"
	"github.com/tailplane/tailplane/proxy/route"
)

// wazero makes its cache folder once; when the folder goes away under a
// running proxy (an emptyDir cleaned, a tmp reaper), every compile used to
// fail with "not a WebAssembly module: open .../<hash>.<n>.tmp: no such
// file or directory". The cache only saves time: loads go on, and the folder
// is made again for the next ones.
func TestLoadSurvivesARemovedCompilationCache(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "wasm-cache")
	logs := &syncbuf.Buffer{}
	e, err := host.NewEngine(host.EngineOptions{CacheDir: dir, Logger: log.NewWithOptions(logs, log.Options{Level: log.DebugLevel})})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close(context.Background()) })
	canary := guest(t, "./plugins/examples/canary")
	misbehave := guest(t, "./plugins/host/testdata/misbehave")

	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	p := load(t, e, host.Config{Name: "canary", Module: canary, PluginConfig: []byte(`{"header":"X-Canary","headerValue":"1"}`),
		Capabilities: []abi.Capability{abi.CapRoute}})
	req := request("/")
	req.Header.Set("X-Canary", "1")
	d, err := p.Route(context.Background(), req, route.Decision{})
	if err != nil || d.Backend == nil || d.Backend.Name != "web-canary:80" {
		t.Fatalf("canary after the cache folder vanished: %+v, %v", d, err)
	}
	if !strings.Contains(logs.String(), "compilation cache failed") {
		t.Errorf("the cache failure is not logged:\n%s", logs)
	}
	cached := func() int {
		n := 0
		_ = filepath.WalkDir(dir, func(_ string, d os.DirEntry, err error) error {
			if err == nil && !d.IsDir() && !strings.HasSuffix(d.Name(), ".tmp") {
				n++
			}
			return nil
		})
		return n
	}
	if cached() != 1 {
		t.Fatalf("the cache folder was not made again with the compiled module (%d files)", cached())
	}

	// Removed again, between two loads of one engine: the same.
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	load(t, e, host.Config{Name: "misbehave", Module: misbehave, Capabilities: []abi.Capability{abi.CapRoute, abi.CapFunnel}})

	// A folder that cannot be made at all (a file is in the way): loads
	// compile in memory.
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dir, []byte("not a folder"), 0o600); err != nil {
		t.Fatal(err)
	}
	load(t, e, host.Config{Name: "canary-2", Module: canary, PluginConfig: []byte(`{}`), Capabilities: []abi.Capability{abi.CapRoute}})
	if !strings.Contains(logs.String(), "compiling in memory") {
		t.Errorf("the fallback to memory is not logged:\n%s", logs)
	}
}
