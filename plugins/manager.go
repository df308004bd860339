package plugins

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/charmbracelet/log"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/kubernetes"

	"github.com/tailplane/tailplane/plugins/host"
	"github.com/tailplane/tailplane/plugins/source"
	"github.com/tailplane/tailplane/proxy/route"
)

// Spec is one plugin as the proxy's config declares it.
type Spec struct {
	// Config is the plugin's host configuration. Module may be empty when
	// Source is set: Apply fetches it.
	host.Config
	// Source, when Module is empty, names the ConfigMap or Secret key to
	// fetch the module from (gzip allowed, sha256 checked).
	Source *source.Ref
	// Order places the plugin in the chain: lower runs first, ties by name.
	Order int
}

// Status is the outcome of Apply for one plugin, for RoutingPlugin status.
type Status struct {
	Name string
	// Loaded reports the plugin serves requests (possibly an older
	// generation when the newest failed: see Error).
	Loaded bool
	// SHA256 and Size describe the module that serves.
	SHA256 string
	Size   int
	// LoadTime is how long the serving generation took to load.
	LoadTime time.Duration
	// Error is why the newest spec did not load, "" if it did.
	Error string
}

// Options configure a Manager.
type Options struct {
	// CacheDir holds wazero's file compilation cache (keyed by the
	// module's content) and, in CacheDir/modules, the fetched modules by
	// sha256 ("" = compile in memory and cache no module).
	CacheDir string
	// Logger defaults to log.Default().
	Logger *log.Logger
	// Registerer receives metrics; nil means a private registry (Registry).
	Registerer prometheus.Registerer
	// Kube fetches Spec.Source modules; may be nil if every Spec has Module.
	Kube kubernetes.Interface
	// OnStatus, when set, receives the statuses after every Apply and after
	// every retry, in order (it is called with the Manager locked): the
	// proxy reports them in its state Secret.
	OnStatus func(ctx context.Context, st []Status)
	// RetryMin and RetryMax bound the backoff between retries of plugins
	// that failed to load (defaults 1 s and 1 min).
	RetryMin, RetryMax time.Duration
}

// Manager is the plugin chain: a route.Router that runs every loaded plugin
// in order and hot-reloads them.
type Manager struct {
	engine  *host.Engine
	modules moduleCache
	log     *log.Logger
	kube    kubernetes.Interface
	opts    Options
	chain   atomic.Pointer[[]*link]
	closed  sync.WaitGroup

	mu     sync.Mutex // serialises Apply, retries and Close
	status map[string]Status
	retry  retrier
}

// link is one plugin in the chain: a loaded generation, or a stand-in for a
// fail-closed plugin that could not load (it answers 503 rather than let
// requests skip, say, an access-control plugin).
type link struct {
	name        string
	order       int
	fingerprint string
	plugin      *host.Plugin
}

// New creates an empty Manager.
func New(opts Options) (*Manager, error) {
	e, err := host.NewEngine(host.EngineOptions{CacheDir: opts.CacheDir, Logger: opts.Logger, Registerer: opts.Registerer})
	if err != nil {
		return nil, err
	}
	m := &Manager{engine: e, log: opts.Logger, kube: opts.Kube, opts: opts, status: map[string]Status{}}
	if opts.CacheDir != "" {
		m.modules.dir = filepath.Join(opts.CacheDir, "modules")
	}
	if m.log == nil {
		m.log = log.Default()
	}
	m.retry.init(opts.RetryMin, opts.RetryMax)
	m.chain.Store(&[]*link{})
	return m, nil
}

// Registry returns the private metrics registry (nil if a Registerer was given).
func (m *Manager) Registry() *prometheus.Registry { return m.engine.Registry() }

// Apply makes the chain match specs: unchanged plugins stay, new and changed
// ones load (before the swap, off the request path), removed ones close once
// their in-flight requests finish. A plugin that fails to load keeps its
// previous generation if it had one; otherwise it answers 503 if fail-closed
// and is skipped if fail-open. Failed plugins are retried in the background
// with backoff until they load or the specs change (see retry.go). The
// statuses are sorted by name.
func (m *Manager) Apply(ctx context.Context, specs []Spec) []Status {
	m.mu.Lock()
	defer m.mu.Unlock()
	st := m.apply(ctx, specs)
	m.retry.after(m, specs, st, true)
	return st
}

// apply is Apply with m.mu held, without scheduling retries.
func (m *Manager) apply(ctx context.Context, specs []Spec) []Status {
	old := map[string]*link{}
	for _, l := range *m.chain.Load() {
		old[l.name] = l
	}
	next := make([]*link, 0, len(specs))
	statuses := map[string]Status{}
	for _, s := range specs {
		l, st := m.prepare(ctx, s, old[s.Name])
		statuses[s.Name] = st
		if l != nil {
			next = append(next, l)
		}
	}
	sort.SliceStable(next, func(i, j int) bool {
		if next[i].order != next[j].order {
			return next[i].order < next[j].order
		}
		return next[i].name < next[j].name
	})
	m.chain.Store(&next)
	keep := map[*host.Plugin]bool{}
	for _, l := range next {
		keep[l.plugin] = true
	}
	for _, l := range old {
		if l.plugin != nil && !keep[l.plugin] {
			m.retire(l.plugin)
		}
	}
	m.status = statuses
	st := m.statuses()
	if m.opts.OnStatus != nil {
		m.opts.OnStatus(ctx, st)
	}
	return st
}

// prepare returns the link for s: the old one if nothing changed, else a
// newly loaded generation (or the old one / a stand-in if loading failed).
func (m *Manager) prepare(ctx context.Context, s Spec, old *link) (*link, Status) {
	st := Status{Name: s.Name}
	cfg := s.Config
	if len(cfg.Module) == 0 && s.Source != nil {
		pin := strings.ToLower(s.Source.SHA256)
		if old != nil && old.plugin != nil && pin != "" && old.fingerprint == fingerprint(s, pin) {
			// Unchanged and pinned to the module it runs: nothing to read.
			old.order = s.Order
			return old, statusOf(st, old.plugin)
		}
		module, cached := m.modules.get(pin)
		if !cached {
			if m.kube == nil {
				return m.failed(s, old, errors.New("module source set but the manager has no Kubernetes client"))
			}
			var digest string
			var err error
			if module, digest, err = source.Fetch(ctx, m.kube, *s.Source); err != nil {
				return m.failed(s, old, err)
			}
			if err := m.modules.put(digest, module); err != nil {
				m.log.Warn("cannot cache the module on disk; the next restart reads it again", "plugin", s.Name, "err", err)
			}
		}
		cfg.Module = module
		if cfg.SHA256 == "" {
			cfg.SHA256 = host.Digest(module)
		}
	}
	fp := fingerprint(s, host.Digest(cfg.Module))
	if old != nil && old.fingerprint == fp && old.plugin != nil {
		old.order = s.Order
		return old, statusOf(st, old.plugin)
	}
	p, err := m.engine.Load(ctx, cfg)
	if err != nil {
		return m.failed(s, old, err)
	}
	if old != nil {
		m.log.Info("plugin reloaded", "plugin", s.Name, "sha256", p.SHA256)
	}
	return &link{name: s.Name, order: s.Order, fingerprint: fp, plugin: p}, statusOf(st, p)
}

func (m *Manager) failed(s Spec, old *link, err error) (*link, Status) {
	st := Status{Name: s.Name, Error: err.Error()}
	if old != nil && old.plugin != nil {
		m.log.Error("plugin reload failed; the previous generation keeps serving", "plugin", s.Name, "err", err)
		old.order = s.Order
		st = statusOf(st, old.plugin)
		return old, st
	}
	if s.FailurePolicy == host.FailOpen {
		m.log.Error("plugin failed to load; skipped (failure policy Open)", "plugin", s.Name, "err", err)
		return nil, st
	}
	m.log.Error("plugin failed to load; its requests get 503 (failure policy Closed)", "plugin", s.Name, "err", err)
	return &link{name: s.Name, order: s.Order}, st
}

func statusOf(st Status, p *host.Plugin) Status {
	st.Loaded, st.SHA256, st.Size, st.LoadTime = true, p.SHA256, p.Size, p.LoadTime
	return st
}

// fingerprint identifies a plugin generation: a change to the module (its
// sha256 digest) or any setting loads a new one.
func fingerprint(s Spec, digest string) string {
	c := s.Config
	c.Module = nil
	b, _ := json.Marshal(struct {
		C host.Config
		M string
	}{c, digest})
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// retire closes p once its in-flight requests are done.
func (m *Manager) retire(p *host.Plugin) {
	m.closed.Add(1)
	go func() {
		defer m.closed.Done()
		if err := p.Close(context.Background()); err != nil {
			m.log.Warn("closing a retired plugin generation", "plugin", p.Name(), "err", err)
		}
	}()
}

// Failures returns the run-time failures of the generations serving now, by
// plugin name. A fail-closed stand-in for a plugin that did not load has
// none: its Status carries the load error.
func (m *Manager) Failures() map[string]host.FailureStats {
	out := map[string]host.FailureStats{}
	for _, l := range *m.chain.Load() {
		if l.plugin != nil {
			out[l.name] = l.plugin.Failures()
		}
	}
	return out
}

// Statuses returns the last Apply's outcome, sorted by name.
func (m *Manager) Statuses() []Status {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.statuses()
}

func (m *Manager) statuses() []Status {
	out := make([]Status, 0, len(m.status))
	for _, s := range m.status {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Route runs the chain: each plugin refines the previous decision; a
// redirect or deny ends it.
func (m *Manager) Route(ctx context.Context, req *route.Request, prev route.Decision) (route.Decision, error) {
	return m.route(ctx, req, prev, nil)
}

// Only returns a router that runs just the plugins named in names, in
// chain order: the chain of one Tailscale Service of a ProxyGroup replica,
// whose services each have their own plugins while the replica runs one
// Manager (Apply gets the union).
func (m *Manager) Only(names []string) route.Router {
	set := make(map[string]bool, len(names))
	for _, n := range names {
		set[n] = true
	}
	return subset{m: m, names: set}
}

type subset struct {
	m     *Manager
	names map[string]bool
}

func (s subset) Route(ctx context.Context, req *route.Request, prev route.Decision) (route.Decision, error) {
	return s.m.route(ctx, req, prev, s.names)
}

// route runs the chain, or only the plugins in only when it is not nil.
func (m *Manager) route(ctx context.Context, req *route.Request, prev route.Decision, only map[string]bool) (route.Decision, error) {
	for attempt := 0; ; attempt++ {
		d, err := m.run(ctx, req, prev, only)
		if !errors.Is(err, host.ErrClosed) || attempt == 3 {
			return d, err
		}
		// A reload retired a generation between loading the chain and
		// calling it: run again on the new chain.
	}
}

func (m *Manager) run(ctx context.Context, req *route.Request, d route.Decision, only map[string]bool) (route.Decision, error) {
	for _, l := range *m.chain.Load() {
		if d.Action != route.Forward {
			break
		}
		if only != nil && !only[l.name] {
			continue
		}
		if l.plugin == nil {
			return route.Decision{Action: route.Deny, Status: http.StatusServiceUnavailable, Body: "Service Unavailable\n", DenyPublic: d.DenyPublic}, nil
		}
		var err error
		if d, err = l.plugin.Route(ctx, req, d); err != nil {
			return d, err
		}
	}
	return d, nil
}

// Close closes every plugin (waiting for in-flight requests) and the engine.
func (m *Manager) Close(ctx context.Context) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.retry.stop()
	chain := *m.chain.Load()
	m.chain.Store(&[]*link{})
	var errs []error
	for _, l := range chain {
		if l.plugin != nil {
			errs = append(errs, l.plugin.Close(ctx))
		}
	}
	m.closed.Wait()
	errs = append(errs, m.engine.Close(ctx))
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("close plugins: %w", err)
	}
	return nil
}

var _ route.Router = (*Manager)(nil)
