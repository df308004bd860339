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
	// FailureLogInterval is how often a plugin that keeps failing logs a
	// summary line per failure class; its first failure is logged at once
	// (0: DefaultFailureLogInterval).
	FailureLogInterval time.Duration
}

// Engine loads plugins. It owns the compilation cache and the metrics that
// every plugin it loads shares.
type Engine struct {
	cache *compilationCache
	log   *log.Logger
	// failureLogInterval: EngineOptions.FailureLogInterval.
	failureLogInterval time.Duration
	metrics            *Metrics
	registry           *prometheus.Registry
}

// NewEngine creates an Engine.
func NewEngine(opts EngineOptions) (*Engine, error) {
	e := &Engine{log: opts.Logger, failureLogInterval: opts.FailureLogInterval}
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
	c, err := newCompilationCache(opts.CacheDir)
	if err != nil {
		return nil, err
	}
	e.cache = c
	return e, nil
}

// Registry returns the private metrics registry, or nil when the Engine was
// given a Registerer.
func (e *Engine) Registry() *prometheus.Registry { return e.registry }

// Close releases the compilation cache. Close every plugin first.
func (e *Engine) Close(ctx context.Context) error { return e.cache.close(ctx) }

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
	r, cm, err := e.compileCached(ctx, cfg, module, watched)
	if err != nil {
		return nil, err
	}
	ok := false
	defer func() {
		if !ok {
			_ = r.Close(ctx)
		}
	}()
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

// compileCached compiles module in a new runtime with the engine's cache.
// A cache that cannot be written is renewed (the folder recreated) and the
// compile retried, then retried once more in memory: the cache only saves
// time, so it never fails a load.
func (e *Engine) compileCached(ctx context.Context, cfg Config, module []byte, watched bool) (wazero.Runtime, wazero.CompiledModule, error) {
	cache := e.cache.get()
	for attempt := 0; ; attempt++ {
		r, cm, err := e.compileWith(ctx, cfg, module, watched, cache)
		if err == nil || !errors.Is(err, ErrCache) || attempt == 2 {
			return r, cm, err
		}
		if attempt == 0 {
			var rerr error
			if cache, rerr = e.cache.renew(cache); rerr != nil {
				e.log.Warn("plugin compilation cache failed and cannot be made again; compiling in memory", "plugin", cfg.Name, "dir", e.cache.dir, "err", err, "mkdir_err", rerr)
			} else {
				e.log.Warn("plugin compilation cache failed; made it again", "plugin", cfg.Name, "dir", e.cache.dir, "err", err)
			}
		} else {
			cache = e.cache.memory()
			e.log.Warn("plugin compilation cache failed again; compiling in memory", "plugin", cfg.Name, "dir", e.cache.dir, "err", err)
		}
	}
}

// compileWith creates the plugin's runtime with cache, its host modules, and
// compiles module in it; the runtime is closed on error.
func (e *Engine) compileWith(ctx context.Context, cfg Config, module []byte, watched bool, cache wazero.CompilationCache) (wazero.Runtime, wazero.CompiledModule, error) {
	rc := wazero.NewRuntimeConfigCompiler().
		WithCompilationCache(cache).
		WithMemoryLimitPages(cfg.memoryPages()).
		WithCloseOnContextDone(cfg.Timeout > 0 && !watched)
	r := wazero.NewRuntimeWithConfig(ctx, rc)
	cm, err := func() (wazero.CompiledModule, error) {
		if _, err := wasi_snapshot_preview1.Instantiate(ctx, r); err != nil {
			return nil, fmt.Errorf("plugin %s: instantiate WASI: %w", cfg.Name, err)
		}
		if err := instantiateHTTPModule(ctx, r); err != nil {
			return nil, fmt.Errorf("plugin %s: %w", cfg.Name, err)
		}
		if err := instantiateRouteModule(ctx, r, cfg); err != nil {
			return nil, fmt.Errorf("plugin %s: %w", cfg.Name, err)
		}
		return compile(ctx, r, cfg, module)
	}()
	if err != nil {
		_ = r.Close(ctx)
		return nil, nil, err
	}
	return r, cm, nil
}

func loadErrorReason(err error) string {
	for _, k := range []struct {
		err    error
		reason string
	}{
		{ErrNotWasm, "not_wasm"}, {ErrMissingExport, "missing_export"}, {ErrABIVersion, "abi_version"},
		{ErrCapability, "capability"}, {ErrUnknownImport, "unknown_import"}, {ErrCommandModule, "command_module"},
		{ErrSHA256Mismatch, "sha256_mismatch"}, {ErrCache, "cache"},
	} {
		if errors.Is(err, k.err) {
			return k.reason
		}
	}
	return "other"
}
