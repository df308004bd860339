package host

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/sys"
)

// initTimeout bounds a guest's _initialize (a Go guest needs a few ms).
const initTimeout = 10 * time.Second

// errBusy: no instance became free before the call's deadline.
var errBusy = errors.New("no plugin instance free before the deadline")

// instance is one instantiated guest. It serves one request at a time.
type instance struct {
	mod            api.Module
	handleRequest  api.Function
	handleResponse api.Function
	features       uint32 // enabled during _initialize: apply to every request
	cc             callCtx
	stack          [2]uint64    // handle_request's result, handle_response's params
	out            *guestOutput // its stdout and stderr

	// With a watchdog: the instrumented module's stop global, and the
	// deadline of the running call (idle, killed, or ns since the epoch).
	stop     api.MutableGlobal
	deadline atomic.Int64
}

// pool holds at most size live instances. Idle instances form a stack: the
// one returned last is handed out first, because its linear memory (a Go
// guest's heap is megabytes) is still in the CPU caches; cycling through
// every instance in turn costs more than the guest's own work. Each idle
// instance has one token in ready, so waiting for one is a select.
type pool struct {
	p       *Plugin
	ready   chan struct{} // one token per idle instance
	slots   chan struct{} // one token per live instance
	warm    int           // instances kept ready: replacements are created in the background
	mu      sync.Mutex
	idle    []*instance // guarded by mu; len(idle) == len(ready) outside mu
	closed  bool
	refills sync.WaitGroup
}

func newPool(p *Plugin, size, warm int) *pool {
	return &pool{p: p, ready: make(chan struct{}, size), slots: make(chan struct{}, size), warm: warm}
}

// prewarm creates n instances before the plugin serves anything, so load
// errors (bad start function, memory limit too low) surface at load.
func (pl *pool) prewarm(ctx context.Context, n int) error {
	for range n {
		pl.slots <- struct{}{}
		in, err := pl.p.instantiate(ctx)
		if err != nil {
			<-pl.slots
			return err
		}
		pl.push(in)
	}
	return nil
}

// tryGet returns an idle instance if there is one, without waiting.
func (pl *pool) tryGet() (*instance, bool) {
	select {
	case <-pl.ready:
		return pl.pop(), true
	default:
		return nil, false
	}
}

// get returns an idle instance, creates one if below the bound, or waits
// until ctx ends.
func (pl *pool) get(ctx context.Context) (*instance, error) {
	if in, ok := pl.tryGet(); ok {
		return in, nil
	}
	select {
	case <-pl.ready:
		return pl.pop(), nil
	case pl.slots <- struct{}{}:
		in, err := pl.p.instantiate(ctx)
		if err != nil {
			<-pl.slots
			return nil, err
		}
		return in, nil
	case <-ctx.Done():
		return nil, errBusy
	}
}

// push adds an idle instance and then its token.
func (pl *pool) push(in *instance) {
	pl.mu.Lock()
	pl.idle = append(pl.idle, in)
	pl.mu.Unlock()
	pl.ready <- struct{}{}
}

// pop takes the most recently returned instance; the caller holds its token.
func (pl *pool) pop() *instance {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	in := pl.idle[len(pl.idle)-1]
	pl.idle[len(pl.idle)-1] = nil
	pl.idle = pl.idle[:len(pl.idle)-1]
	return in
}

// put returns a healthy instance.
func (pl *pool) put(in *instance) {
	pl.mu.Lock()
	closed := pl.closed
	pl.mu.Unlock()
	if closed {
		pl.drop(in)
		return
	}
	pl.push(in)
}

// discard closes an instance that trapped or timed out (its state is
// undefined) and refills the pool in the background.
func (pl *pool) discard(in *instance) {
	pl.drop(in)
	pl.mu.Lock()
	defer pl.mu.Unlock()
	if pl.closed || len(pl.ready) >= pl.warm {
		return
	}
	pl.refills.Add(1)
	go func() {
		defer pl.refills.Done()
		pl.refill()
	}()
}

func (pl *pool) refill() {
	select {
	case pl.slots <- struct{}{}:
	default:
		return // the bound is reached: nothing to refill
	}
	ctx, cancel := context.WithTimeout(context.Background(), initTimeout)
	defer cancel()
	in, err := pl.p.instantiate(ctx)
	if err != nil {
		<-pl.slots
		pl.p.log.Error("replacing a discarded instance failed", "err", err)
		return
	}
	pl.put(in)
}

func (pl *pool) drop(in *instance) {
	if pl.p.watch != nil {
		pl.p.watch.remove(in)
	}
	_ = in.mod.Close(context.Background())
	pl.p.m.instances.Dec()
	<-pl.slots
}

// close closes idle instances; callers guarantee none is in use.
func (pl *pool) close() {
	pl.mu.Lock()
	pl.closed = true
	pl.mu.Unlock()
	pl.refills.Wait()
	for {
		select {
		case <-pl.ready:
			pl.drop(pl.pop())
		default:
			return
		}
	}
}

// instantiate creates and initialises one guest instance.
func (p *Plugin) instantiate(ctx context.Context) (*instance, error) {
	in := &instance{out: &guestOutput{log: p.log}}
	start := p.start
	if p.watch != nil {
		start = nil // run below, under the watchdog
	}
	mc := wazero.NewModuleConfig().
		WithName(""). // anonymous: many instances of one module
		WithStartFunctions(start...).
		WithSysWalltime().WithSysNanotime().WithRandSource(rand.Reader).
		WithStdout(in.out).WithStderr(in.out)
	for k, v := range p.cfg.Env {
		mc = mc.WithEnv(k, v)
	}
	// Initialisation gets its own deadline, not the request's: a new
	// instance is worth finishing even if the request that asked gives up.
	ictx, cancel := context.WithTimeout(context.WithoutCancel(ctx), initTimeout)
	defer cancel()
	ictx = context.WithValue(ictx, exchangeKey{}, &exchange{plugin: p, inst: in, inInit: true})
	mod, err := p.runtime.InstantiateModule(ictx, p.compiled, mc)
	if err == nil && p.watch != nil {
		err = p.initWatched(ictx, in, mod)
	}
	if err != nil {
		var exit *sys.ExitError
		if errors.As(err, &exit) && exit.ExitCode() == 0 {
			return nil, fmt.Errorf("plugin %s: %w: its start function ran to completion and exited; build Go guests with -buildmode=c-shared", p.cfg.Name, ErrCommandModule)
		}
		return nil, fmt.Errorf("plugin %s: instantiate: %w", p.cfg.Name, err)
	}
	if mod.IsClosed() {
		// wazero reports proc_exit(0) from _start as success, with the
		// module closed: a Go program built without -buildmode=c-shared.
		return nil, fmt.Errorf("plugin %s: %w: its start function ran main and exited; build Go guests with -buildmode=c-shared", p.cfg.Name, ErrCommandModule)
	}
	in.mod = mod
	in.handleRequest = mod.ExportedFunction("handle_request")
	in.handleResponse = mod.ExportedFunction("handle_response")
	p.instanceMemory.Store(uint64(mod.Memory().Size()))
	p.m.created.Inc()
	p.m.instances.Inc()
	return in, nil
}

// initWatched registers a new instance of an instrumented module with the
// watchdog and runs its start functions under the init deadline.
func (p *Plugin) initWatched(ctx context.Context, in *instance, mod api.Module) error {
	stop, ok := mod.ExportedGlobal(stopExport).(api.MutableGlobal)
	if !ok {
		_ = mod.Close(ctx)
		return fmt.Errorf("instrumented module has no mutable %s", stopExport)
	}
	in.stop = stop
	p.watch.add(in)
	for _, name := range p.start {
		token := p.watch.begin(in, initTimeout)
		_, err := mod.ExportedFunction(name).Call(ctx)
		if !p.watch.end(in, token) {
			err = fmt.Errorf("%s: %w", name, errDeadline)
		}
		if err != nil {
			p.watch.remove(in)
			_ = mod.Close(ctx)
			return err
		}
		if mod.IsClosed() {
			break // proc_exit(0): reported below as a command module
		}
	}
	return nil
}
