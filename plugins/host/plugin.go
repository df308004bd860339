package host

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/charmbracelet/log"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/sys"

	"github.com/tailplane/tailplane/proxy/route"
)

// ErrClosed is returned by a Plugin used after Close.
var ErrClosed = errors.New("plugin closed")

// unavailableBody is all a client learns when a fail-closed plugin fails;
// the reason goes to logs and metrics only.
const unavailableBody = "Service Unavailable\n"

// acquireTimeout bounds the wait for a free (or new) instance when the pool
// is at its bound.
const acquireTimeout = time.Second

// Plugin is one loaded generation of a plugin: its own wazero runtime (so
// its own memory limit), compiled module and instance pool. It is a
// route.Router and safe for concurrent use.
type Plugin struct {
	// SHA256 is the hex digest of the module.
	SHA256 string
	// Size is the module's size in bytes.
	Size int
	// LoadTime is how long Load took (compile or cache hit, plus pre-warm).
	LoadTime time.Duration

	cfg      Config
	runtime  wazero.Runtime
	compiled wazero.CompiledModule
	start    []string
	pool     *pool
	log      *log.Logger
	m        *pluginMetrics
	fails    *failures
	// watch enforces deadlines; nil without a deadline or when the module
	// could not be instrumented (then wazero's WithCloseOnContextDone does).
	watch *watchdog

	instanceMemory atomic.Uint64

	// inflight is read-locked by every call; Close takes the write lock, so
	// a reload never closes a generation under a running request.
	inflight sync.RWMutex
	closed   bool

	// exchanges recycles the per-request state of Route, which ends with
	// the call (the Decision it returns holds copies, never the exchange).
	exchanges sync.Pool
}

func newPlugin(e *Engine, cfg Config, r wazero.Runtime, cm wazero.CompiledModule) *Plugin {
	l := e.log.With("plugin", cfg.Name)
	p := &Plugin{
		SHA256:   Digest(cfg.Module),
		Size:     len(cfg.Module),
		cfg:      cfg,
		runtime:  r,
		compiled: cm,
		start:    startFunctions(cm),
		log:      l,
		m:        e.metrics.forPlugin(cfg.Name),
		fails:    newFailures(l, e.failureLogInterval),
	}
	p.pool = newPool(p, cfg.PoolSize, cfg.Prewarm)
	return p
}

// InstanceMemory returns the linear memory, in bytes, of the most recently
// created instance right after its initialisation.
func (p *Plugin) InstanceMemory() uint64 { return p.instanceMemory.Load() }

// Name returns the plugin's configured name.
func (p *Plugin) Name() string { return p.cfg.Name }

// Config returns the configuration the plugin was loaded with (defaults
// filled in).
func (p *Plugin) Config() Config { return p.cfg }

// Failures returns the plugin's run-time failures since it loaded.
func (p *Plugin) Failures() FailureStats { return p.fails.stats() }

// Close waits for in-flight calls, then frees the instances and runtime.
func (p *Plugin) Close(ctx context.Context) error {
	p.inflight.Lock()
	defer p.inflight.Unlock()
	if p.closed {
		return nil
	}
	p.closed = true
	p.fails.close()
	p.pool.close()
	if p.watch != nil {
		p.watch.close()
	}
	return p.runtime.Close(ctx)
}

func (p *Plugin) closeNow(ctx context.Context) {
	p.closed = true
	p.fails.close()
	p.pool.close()
	if p.watch != nil {
		p.watch.close()
	}
	_ = p.runtime.Close(ctx)
}

// Route runs the guest's handle_request on req and returns prev refined by
// what the guest did. Routing happens before any upstream answer exists, so
// handle_response is not called here (Middleware runs the full cycle), and
// read_body on the request reports an empty body. It never returns the guest's error to the caller's
// client: a failed plugin yields prev (FailOpen) or a 503 Deny (FailClosed).
// The only error is ErrClosed.
func (p *Plugin) Route(ctx context.Context, req *route.Request, prev route.Decision) (route.Decision, error) {
	if prev.Action != route.Forward || (req.Public && prev.DenyPublic) {
		return prev, nil // already answered: nothing left to refine
	}
	p.inflight.RLock()
	defer p.inflight.RUnlock()
	if p.closed {
		return prev, ErrClosed
	}
	p.fails.requests.Add(1)
	x := newRoutingExchange(p, req, prev)
	defer p.exchanges.Put(x)
	next, _, err := p.call(ctx, x, nil)
	if err != nil {
		return p.fail(prev, classOf(err), err), nil
	}
	d, err := x.decision(prev, next)
	if err != nil {
		p.m.invalid.Inc()
		return p.fail(prev, FailureInvalid, err), nil
	}
	p.m.decided(prev, d)
	return d, nil
}

// call runs handle_request on a pooled instance. When keep is non-nil the
// instance stays pinned to the request (middleware mode) and *keep receives
// it; otherwise it goes back to the pool.
func (p *Plugin) call(ctx context.Context, x *exchange, keep **instance) (next bool, reqCtx uint32, err error) {
	// Waiting for an instance (or for a new one to initialise) has its own
	// bound; the call's deadline starts when the guest starts running.
	in, ok := p.pool.tryGet() // the common case needs no timer
	if !ok {
		actx, acancel := context.WithTimeout(ctx, max(p.cfg.Timeout, acquireTimeout))
		in, err = p.pool.get(actx)
		acancel()
		if err != nil {
			p.m.busy.Inc()
			return false, 0, fmt.Errorf("plugin %s: %w", p.cfg.Name, err)
		}
	}
	x.inst = in
	x.features = in.features
	res, err := p.invoke(ctx, x, in, in.handleRequest)
	if err != nil {
		err = &callError{plugin: p.cfg.Name, fn: "handle_request", err: err, guest: in.out.panicMessage()}
		p.discard(in, err)
		return false, 0, err
	}
	if keep != nil {
		*keep = in
	} else {
		p.pool.put(in)
	}
	p.m.ok.Inc()
	x.countRefusals()
	return uint32(res) == 1, uint32(res >> 32), nil
}

// callResponse runs handle_response on the pinned instance and returns it.
func (p *Plugin) callResponse(ctx context.Context, x *exchange, in *instance, reqCtx uint32, isError bool) error {
	var e uint64
	if isError {
		e = 1
	}
	if _, err := p.invoke(ctx, x, in, in.handleResponse, uint64(reqCtx), e); err != nil {
		err = &callError{plugin: p.cfg.Name, fn: "handle_response", err: err, guest: in.out.panicMessage()}
		p.discard(in, err)
		return err
	}
	p.pool.put(in)
	p.m.ok.Inc()
	x.countRefusals()
	return nil
}

// invoke calls fn on in under the plugin's deadline: the watchdog's when
// the module is instrumented, else wazero's (a context deadline). It
// returns fn's first result (0 when it has none). The call's values pass
// through the instance's own stack, so it allocates nothing.
func (p *Plugin) invoke(ctx context.Context, x *exchange, in *instance, fn api.Function, params ...uint64) (uint64, error) {
	in.out.startCall()
	stack := in.stack[:]
	stack[0], stack[1] = 0, 0
	copy(stack, params)
	if p.watch != nil {
		token := p.watch.begin(in, p.cfg.Timeout)
		err := fn.CallWithStack(in.callContext(ctx, x, false), stack)
		if !p.watch.end(in, token) {
			return 0, errDeadline
		}
		return stack[0], err
	}
	if p.cfg.Timeout <= 0 {
		err := fn.CallWithStack(in.callContext(ctx, x, false), stack)
		return stack[0], err
	}
	cctx, cancel := context.WithTimeout(ctx, p.cfg.Timeout)
	defer cancel()
	err := fn.CallWithStack(in.callContext(cctx, x, true), stack)
	return stack[0], err
}

// callContext returns the context for one call. Unless wazero enforces the
// deadline (watched: the fallback for modules the watchdog cannot
// instrument), nothing reads the context from another goroutine, so the
// instance's own callCtx is reused and the call allocates nothing; wazero's
// watcher may still read the context after the call returns, so a watched
// call gets a fresh one.
func (in *instance) callContext(ctx context.Context, x *exchange, watched bool) context.Context {
	if watched {
		return &callCtx{Context: ctx, x: x}
	}
	in.cc.Context, in.cc.x = ctx, x
	return &in.cc
}

// discard throws away an instance whose call failed: after a trap or a
// timeout its memory and runtime state are undefined.
func (p *Plugin) discard(in *instance, err error) {
	var exit *sys.ExitError
	if errors.As(err, &exit) && (exit.ExitCode() == sys.ExitCodeDeadlineExceeded || exit.ExitCode() == sys.ExitCodeContextCanceled) {
		p.m.timeout.Inc()
		p.m.discardTimeout.Inc()
	} else {
		p.m.trap.Inc()
		p.m.discardTrap.Inc()
	}
	p.pool.discard(in)
}

// Log lines of failed requests, by what the host did about them.
const (
	msgFailedOpen     = "plugin failed; skipped (failure policy Open)"
	msgFailedClosed   = "plugin failed; answering 503 (failure policy Closed)"
	msgResponseFailed = "plugin failed in handle_response; answering 503"
	msgResponseLate   = "plugin failed in handle_response (response already sent)"
)

// fail applies the failure policy. The error is counted and logged
// (throttled), never returned.
func (p *Plugin) fail(prev route.Decision, class string, err error) route.Decision {
	if p.cfg.FailurePolicy == FailOpen {
		p.m.failOpen.Inc()
		p.fails.record(class, err, log.WarnLevel, msgFailedOpen)
		return prev
	}
	p.m.failClosed.Inc()
	p.fails.record(class, err, log.ErrorLevel, msgFailedClosed)
	return route.Decision{Action: route.Deny, Status: http.StatusServiceUnavailable, Body: unavailableBody, DenyPublic: prev.DenyPublic}
}

func (x *exchange) countRefusals() {
	if x.backendRejected {
		x.plugin.m.refusedBackend.Inc()
		x.backendRejected = false
	}
	if x.funnelWidenRejected {
		x.plugin.m.refusedFunnel.Inc()
		x.funnelWidenRejected = false
	}
}

var _ route.Router = (*Plugin)(nil)
