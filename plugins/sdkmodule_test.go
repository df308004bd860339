package plugins_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/module"
	modzip "golang.org/x/mod/zip"

	"github.com/tailplane/tailplane/plugins/host"
	"github.com/tailplane/tailplane/plugins/internal/wasmbuild"
	"github.com/tailplane/tailplane/plugins/sdk/abi"
	"github.com/tailplane/tailplane/proxy/route"
)

// sdkModule is the guest SDK's own module path.
const sdkModule = "github.com/tailplane/tailplane/plugins/sdk"

// outsidePlugin is the canary plugin of docs/plugins.md, as an outside author
// writes it in a module of their own.
const outsidePlugin = `package main

import "github.com/tailplane/tailplane/plugins/sdk"

func init() { // c-shared modules run init, never main
	sdk.HandleRequest(func(req sdk.Request, resp sdk.Response) bool {
		if req.Header("X-Canary") == "1" {
			_ = sdk.SetBackend("web-canary:80") // capability "route"; refused unless the route offers it
		}
		return true // pass on; return resp.Redirect(...) or resp.Deny(...) to answer
	})
}

func main() {}
`

// An outside author needs only the SDK module: it is published as a module
// of its own (served here by a file GOPROXY holding nothing else, so a
// dependency on the main module or anything else would fail the build),
// `go get` adds it, and the plugin builds and runs in the host. Its short
// backend name resolves in the route's namespace.
func TestSDKIsAModuleOfItsOwn(t *testing.T) {
	root := wasmbuild.Root(t)
	proxyDir := t.TempDir()
	const version = "v0.1.0"
	mv := module.Version{Path: sdkModule, Version: version}
	esc, err := module.EscapePath(sdkModule)
	if err != nil {
		t.Fatal(err)
	}
	at := filepath.Join(proxyDir, esc, "@v")
	if err := os.MkdirAll(at, 0o755); err != nil {
		t.Fatal(err)
	}
	zf, err := os.Create(filepath.Join(at, version+".zip"))
	if err != nil {
		t.Fatal(err)
	}
	if err := modzip.CreateFromDir(zf, mv, filepath.Join(root, "plugins", "sdk")); err != nil {
		t.Fatalf("the SDK folder is not a valid module: %v", err)
	}
	if err := zf.Close(); err != nil {
		t.Fatal(err)
	}
	gomod, err := os.ReadFile(filepath.Join(root, "plugins", "sdk", "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(gomod), "require") {
		t.Errorf("the SDK module requires other modules; it should need only the standard library:\n%s", gomod)
	}
	info, _ := json.Marshal(map[string]any{"Version": version, "Time": time.Now().UTC().Format(time.RFC3339)})
	for name, b := range map[string][]byte{"list": []byte(version + "\n"), version + ".info": info, version + ".mod": gomod} {
		if err := os.WriteFile(filepath.Join(at, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	author := t.TempDir()
	files := map[string]string{"go.mod": "module example.com/canary\n\ngo 1.24\n", "main.go": outsidePlugin}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(author, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	env := append(os.Environ(), "GOPROXY=file://"+filepath.ToSlash(proxyDir), "GOSUMDB=off", "GOFLAGS=-modcacherw",
		"GOMODCACHE="+t.TempDir(), "GOWORK=off", "GOTOOLCHAIN=local")
	run := func(extra []string, args ...string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "go", args...)
		cmd.Dir, cmd.Env = author, append(env, extra...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	run(nil, "get", sdkModule+"@"+version)
	run([]string{"GOOS=wasip1", "GOARCH=wasm"}, "build", "-buildmode=c-shared", "-o", "plugin.wasm", ".")
	wasm, err := os.ReadFile(filepath.Join(author, "plugin.wasm"))
	if err != nil {
		t.Fatal(err)
	}

	e, err := host.NewEngine(host.EngineOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = e.Close(context.Background()) }()
	p, err := e.Load(context.Background(), host.Config{Name: "outside", Module: wasm, Capabilities: []abi.Capability{abi.CapRoute}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = p.Close(context.Background()) }()
	rt := &route.Route{Path: "/", Backends: []route.Backend{{Name: "apps/web:80", Address: "10.0.0.1:80"}, {Name: "apps/web-canary:80", Address: "10.0.0.2:80"}}}
	r := req("/")
	r.Route = rt
	r.Header.Set("X-Canary", "1")
	d, err := p.Route(context.Background(), r, route.Decision{})
	if err != nil || d.Backend == nil || d.Backend.Name != "apps/web-canary:80" {
		t.Fatalf("decision %+v, %v; want apps/web-canary:80 chosen by its short name", d, err)
	}
}
