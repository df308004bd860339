package host_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/tailplane/tailplane/plugins/host"
	"github.com/tailplane/tailplane/plugins/internal/wasmbuild"
	"github.com/tailplane/tailplane/plugins/sdk/abi"
	"github.com/tailplane/tailplane/proxy/route"
)

// Every kind of bad module is refused at load with a specific error, counted
// by reason, and the engine goes on loading and serving good plugins.
func TestLoadRefusesBadModules(t *testing.T) {
	e, logs := newEngine(t)
	misbehave := guest(t, "./plugins/host/testdata/misbehave")
	cases := []struct {
		name   string
		cfg    host.Config
		err    error
		reason string
		text   string
	}{
		{"not wasm", host.Config{Module: []byte("#!/bin/sh\necho hi\n")}, host.ErrNotWasm, "not_wasm", "without the \\0asm header"},
		{"corrupt wasm", host.Config{Module: []byte("\x00asm\x01\x00\x00\x00\x01\xff\xff")}, host.ErrNotWasm, "not_wasm", "not a WebAssembly module"},
		{"missing exports", host.Config{Module: []byte("\x00asm\x01\x00\x00\x00")}, host.ErrMissingExport, "missing_export", `"handle_request" is not exported`},
		{"wrong ABI version", host.Config{Module: guest(t, "./plugins/host/testdata/abiv2")}, host.ErrABIVersion, "abi_version", "built for routing module tailplane_route_v2; this host provides tailplane_route_v1"},
		{"capability not granted", host.Config{Module: misbehave, Capabilities: []abi.Capability{abi.CapRoute}}, host.ErrCapability, "capability", `needs capability "funnel"`},
		{"sha256 mismatch", host.Config{Module: misbehave, SHA256: strings.Repeat("ab", 32)}, host.ErrSHA256Mismatch, "sha256_mismatch", "config pins abab"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.cfg.Name = strings.ReplaceAll(c.name, " ", "-")
			_, err := e.Load(context.Background(), c.cfg)
			if !errors.Is(err, c.err) {
				t.Fatalf("Load: %v, want %v", err, c.err)
			}
			if !strings.Contains(err.Error(), c.text) || !strings.Contains(err.Error(), c.cfg.Name) {
				t.Errorf("error %q should name the plugin and say %q", err, c.text)
			}
			if got := metric(t, e, "tailplane_plugin_load_errors_total", map[string]string{"plugin": c.cfg.Name, "reason": c.reason}); got != 1 {
				t.Errorf("load_errors_total{reason=%s} = %v, want 1", c.reason, got)
			}
			if !strings.Contains(logs.String(), c.cfg.Name) {
				t.Errorf("the failure is not in the logs")
			}
		})
	}
	_, err := e.Load(context.Background(), host.Config{Name: "command", Module: wasmbuild.GoCommand(t, "./plugins/host/testdata/command")})
	if !errors.Is(err, host.ErrCommandModule) || !strings.Contains(err.Error(), "-buildmode=c-shared") {
		t.Errorf("a Go command module: %v, want ErrCommandModule telling how to build", err)
	}
	// The same module with its capabilities loads and serves.
	p := load(t, e, host.Config{Name: "good", Module: misbehave, SHA256: host.Digest(misbehave),
		Capabilities: []abi.Capability{abi.CapRoute, abi.CapFunnel}})
	d, err := p.Route(context.Background(), request("/"), route.Decision{})
	if err != nil || d.SetRequestHeaders.Get("X-Plugin") != "seen" {
		t.Fatalf("good plugin after bad ones: %+v, %v", d, err)
	}
}

// A guest that only imports the functions its capabilities grant loads; the
// routing module is not even importable without them.
func TestCapabilityGating(t *testing.T) {
	e, _ := newEngine(t)
	canary := guest(t, "./plugins/examples/canary")
	_, err := e.Load(context.Background(), host.Config{Name: "canary-nocap", Module: canary, PluginConfig: []byte(`{}`)})
	if !errors.Is(err, host.ErrCapability) || !strings.Contains(err.Error(), `capability "route"`) {
		t.Fatalf("Load without capability: %v", err)
	}
	load(t, e, host.Config{Name: "canary", Module: canary, PluginConfig: []byte(`{}`), Capabilities: []abi.Capability{abi.CapRoute}})
}

func TestConfigValidation(t *testing.T) {
	e, _ := newEngine(t)
	for _, cfg := range []host.Config{
		{Name: ""},
		{Name: "x", FailurePolicy: "Sometimes"},
		{Name: "x", MemoryLimit: 1 << 20},
		{Name: "x", Capabilities: []abi.Capability{"filesystem"}},
	} {
		if _, err := e.Load(context.Background(), cfg); err == nil {
			t.Errorf("Load(%+v) succeeded", cfg)
		}
	}
}
