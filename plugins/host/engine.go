package host

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/charmbracelet/log"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
)

// EngineOptions configure an Engine.
type EngineOptions struct {
	// CacheDir holds wazero's file compilation cache, so a module compiles
	// once per host (a Go guest takes about a second, 30 ms from the cache).
	// Empty means an in-memory cache.
	CacheDir string
	// Logger receives host and guest logs; nil means log.Default().
	Logger *log.Logger
	// Registerer receives the metrics; nil means a new private registry
	// (Engine.Registry returns it).
	Registerer prometheus.Registerer
}

// Engine loads plugins. It owns the compilation cache and the metrics that
// every plugin it loads shares.
type Engine struct {
	cache    wazero.CompilationCache
	log      *log.Logger
	metrics  *Metrics
	registry *prometheus.Registry
}

// NewEngine creates an Engine.
func NewEngine(opts EngineOptions) (*Engine, error) {
	e := &Engine{log: opts.Logger}
	if e.log == nil {
		e.log = log.Default()
	}
	reg := opts.Registerer
	if reg == nil {
		e.registry = prometheus.NewRegistry()
		reg = e.registry
	}
	m, err := newMetrics(reg)
	if err != nil {
		return nil, err
	}
	e.metrics = m
	if opts.CacheDir != "" {
		c, err := wazero.NewCompilationCacheWithDir(opts.CacheDir)
		if err != nil {
			return nil, fmt.Errorf("plugin compilation cache in %s: %w", opts.CacheDir, err)
		}
		e.cache = c
	} else {
		e.cache = wazero.NewCompilationCache()
	}
	return e, nil
}

// Registry returns the private metrics registry, or nil when the Engine was
// given a Registerer.
func (e *Engine) Registry() *prometheus.Registry { return e.registry }

// Close releases the compilation cache. Close every plugin first.
func (e *Engine) Close(ctx context.Context) error { return e.cache.Close(ctx) }

// Load validates and compiles cfg.Module, then pre-warms cfg.Prewarm
// instances, all before returning: the request path never compiles. Errors
// wrap ErrNotWasm, ErrMissingExport, ErrABIVersion, ErrCapability,
// ErrUnknownImport, ErrCommandModule or ErrSHA256Mismatch and name the
// plugin; they are also counted in tailplane_plugin_load_errors_total.
func (e *Engine) Load(ctx context.Context, cfg Config) (*Plugin, error) {
	p, err := e.load(ctx, cfg)
	if err != nil {
		e.metrics.loadErrors.WithLabelValues(cfg.Name, loadErrorReason(err)).Inc()
		e.log.Error("plugin failed to load", "plugin", cfg.Name, "err", err)
		return nil, err
	}
	return p, nil
}

func (e *Engine) load(ctx context.Context, cfg Config) (*Plugin, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	start := time.Now()
	// With a deadline, the module is instrumented for the watchdog (see
	// instrument.go). A module the rewrite does not understand falls back
	// to wazero's own deadline: correct, but ~5 µs more per call.
	module, watched, hadStart := cfg.Module, false, false
	if cfg.Timeout > 0 && bytes.HasPrefix(cfg.Module, wasmMagic) {
		m, s, err := instrument(cfg.Module)
		if err != nil {
			e.log.Warn("plugin not instrumented for the watchdog; using wazero's slower per-call deadline", "plugin", cfg.Name, "err", err)
		} else {
			module, watched, hadStart = m, true, s
		}
	}
	rc := wazero.NewRuntimeConfigCompiler().
		WithCompilationCache(e.cache).
		WithMemoryLimitPages(cfg.memoryPages()).
		WithCloseOnContextDone(cfg.Timeout > 0 && !watched)
	r := wazero.NewRuntimeWithConfig(ctx, rc)
	ok := false
	defer func() {
		if !ok {
			_ = r.Close(ctx)
		}
	}()
	if _, err := wasi_snapshot_preview1.Instantiate(ctx, r); err != nil {
		return nil, fmt.Errorf("plugin %s: instantiate WASI: %w", cfg.Name, err)
	}
	if err := instantiateHTTPModule(ctx, r); err != nil {
		return nil, fmt.Errorf("plugin %s: %w", cfg.Name, err)
	}
	if err := instantiateRouteModule(ctx, r, cfg); err != nil {
		return nil, fmt.Errorf("plugin %s: %w", cfg.Name, err)
	}
	cm, err := compile(ctx, r, cfg, module)
	if err != nil {
		return nil, err
	}
	p := newPlugin(e, cfg, r, cm)
	if watched {
		if hadStart {
			p.start = append([]string{startExport}, p.start...)
		}
		p.watch = newWatchdog(min(cfg.Timeout, initTimeout))
	}
	compiled := time.Since(start)
	if err := p.pool.prewarm(ctx, cfg.Prewarm); err != nil {
		p.closeNow(ctx)
		return nil, err
	}
	ok = true
	p.LoadTime = time.Since(start)
	e.log.Info("plugin loaded", "plugin", cfg.Name, "sha256", p.SHA256, "bytes", len(cfg.Module),
		"compile", compiled.Round(time.Millisecond), "ready", p.LoadTime.Round(time.Millisecond))
	return p, nil
}

func loadErrorReason(err error) string {
	for _, k := range []struct {
		err    error
		reason string
	}{
		{ErrNotWasm, "not_wasm"}, {ErrMissingExport, "missing_export"}, {ErrABIVersion, "abi_version"},
		{ErrCapability, "capability"}, {ErrUnknownImport, "unknown_import"}, {ErrCommandModule, "command_module"},
		{ErrSHA256Mismatch, "sha256_mismatch"},
	} {
		if errors.Is(err, k.err) {
			return k.reason
		}
	}
	return "other"
}
