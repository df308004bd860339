package proxy

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	"github.com/charmbracelet/log"
	"tailscale.com/client/local"
	"tailscale.com/ipn"
	"tailscale.com/tsnet"

	"github.com/tailplane/tailplane/internal/proxystate"
	"github.com/tailplane/tailplane/proxy/config"
	"github.com/tailplane/tailplane/proxy/l4"
	"github.com/tailplane/tailplane/proxy/l7"
	"github.com/tailplane/tailplane/proxy/metrics"
)

// Engine is one running proxy: a tsnet node plus the listeners its current
// config asks for. Create it with New and run it with Run.
type Engine struct {
	opts    Options
	log     *log.Logger
	metrics *metrics.Metrics

	node     *tsnet.Server
	hostname string         // the name the node presents to control; Run goroutine only
	current  *config.Config // last applied config; only the Run goroutine touches it
	active   atomic.Bool    // a config is being served
	loggedIn atomic.Bool
	// status asks the running node for its state (tailnetOnline); nil
	// until the node logged in and after it closed.
	status atomic.Pointer[local.Client]

	// advertised is what the node's prefs advertise (Run goroutine only;
	// nil until set for the running node); forward is the same while the
	// role is connector, read by the node's flow hooks.
	advertised *advertisement
	forward    atomic.Pointer[advertisement]

	certs     atomic.Pointer[certSource]
	localAddr atomic.Value // string
	plainHTTP atomic.Bool  // port 80 serves routes (true) or redirects
	l7        *l7.Handler
	transport http.RoundTripper // to L7 backends, shared by every handler
	ingress   *l4.Relay         // tailnet -> cluster
	egress    *l4.Relay         // cluster -> tailnet
	targets   atomic.Pointer[map[string]string]
	sources   atomic.Pointer[sourceFilter]
	listen    map[string]*listenerHandle
	nodeDone  chan struct{}
	renamed   chan struct{} // wakes reportDevice after a rename (buffered, 1)
	// certWarmed is the hostname whose certificate warmCert fetches.
	certWarmed string

	// The gateway role (gateway.go): the current plan, read by its
	// listeners, and the L7 handler of each HTTP(S) port (Run goroutine
	// only), kept across reloads.
	gateway         atomic.Pointer[gatewayPlan]
	gatewayHandlers map[int]*l7.Handler

	// The ingress-group role (see group.go). vips and vipTCP are read by
	// the node's flow hook; the rest belongs to the Run goroutine.
	vips               atomic.Pointer[vipMap]
	vipMu              sync.Mutex
	vipTCP             map[vipPort]*connListener
	groupWake          chan struct{} // buffered, 1
	dnsSuffix          string        // the tailnet's MagicDNS suffix
	group              map[string]*groupService
	groupErrs          map[string]error // per service, from the config
	listenErrs         map[string]error // per service, listeners that failed
	sharedCerts        map[string]*sharedCert
	servicesAdvertised []string
	servicesPorts      map[string][]uint16
	servicesReported   map[string]proxystate.ServiceReport
	apiHandlers        map[config.APIServerMode]http.Handler // kube-apiserver role, by mode
	// hostWait is set while a group replica waits for control to route
	// what it advertises to it (see hostReadiness); /healthz fails then.
	hostWait      atomic.Bool
	hostWaitStart time.Time // when the wait began; zero before
	hostReady     bool      // the wait is over, for this process
	hostWake      bool      // a wake at the grace's end is scheduled

	// priming is set while a new process pings the peers its previous
	// process recorded (peers.go); /healthz fails then.
	priming atomic.Bool
	peers   peerState

	wg sync.WaitGroup
	// hard ends relayed connections; it outlives Run's context so that
	// draining connections keep flowing until the drain deadline.
	hard       context.Context
	hardCancel context.CancelFunc
}

// New checks the options and returns an engine that is not running yet.
func New(opts Options) (*Engine, error) {
	if opts.Source == nil || opts.State == nil || opts.StateDir == "" || opts.Logger == nil {
		return nil, errors.New("proxy: Options.Source, State, StateDir and Logger are required")
	}
	if opts.DrainTimeout == 0 {
		opts.DrainTimeout = 25 * time.Second
	}
	if opts.TLSRefreshInterval == 0 {
		opts.TLSRefreshInterval = time.Minute
	}
	if opts.PeerRecordInterval == 0 {
		opts.PeerRecordInterval = peerRecordInterval
	}
	if opts.Metrics == nil {
		opts.Metrics = metrics.New()
	}
	e := &Engine{opts: opts, log: opts.Logger, metrics: opts.Metrics, listen: map[string]*listenerHandle{}, renamed: make(chan struct{}, 1),
		vipTCP: map[vipPort]*connListener{}, gatewayHandlers: map[int]*l7.Handler{}, groupWake: make(chan struct{}, 1), sharedCerts: map[string]*sharedCert{}}
	e.hard, e.hardCancel = context.WithCancel(context.Background())
	e.targets.Store(&map[string]string{})
	e.sources.Store(&sourceFilter{})
	e.transport = l7.NewTransport()
	e.l7 = l7.NewHandler(e.whois, e.transport, e.metrics, e.log)
	e.ingress = l4.NewRelay("l4", (&net.Dialer{}).DialContext, e.metrics, e.log)
	e.egress = l4.NewRelay("egress", e.dialTailnet, e.metrics, e.log)
	e.metrics.SetState(e.Ready, e.tailnetOnline)
	return e, nil
}

// Metrics returns the engine's metrics (to serve them elsewhere, or in tests).
func (e *Engine) Metrics() *metrics.Metrics { return e.metrics }

// Ready reports whether the node is logged in, a config is active, the
// recent peers of the previous process were pinged (peers.go) and, in a
// group role, control routes what the replica advertises to it.
func (e *Engine) Ready() bool {
	return e.loggedIn.Load() && e.active.Load() && !e.priming.Load() && !e.hostWait.Load()
}

// tailnetOnline reports whether the node is logged in and its connection
// to control runs (backend state Running): tailplane_proxy_tailnet_online.
func (e *Engine) tailnetOnline() bool {
	lc := e.status.Load()
	if lc == nil || !e.loggedIn.Load() {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	st, err := lc.StatusWithoutPeers(ctx)
	return err == nil && st.BackendState == ipn.Running.String()
}

// Node returns the tsnet node once the first config started it, else nil.
// It is meant for tests and diagnostics.
func (e *Engine) Node() *tsnet.Server { return e.node }

// Run serves until ctx is done, then drains in-flight work for at most
// DrainTimeout and returns. Bad configs never make it return.
func (e *Engine) Run(ctx context.Context) error {
	local, err := e.startLocal()
	if err != nil {
		return err
	}
	docs := make(chan []byte, 1)
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		if err := e.opts.Source.Run(watchCtx, func(b []byte) {
			select {
			case docs <- b:
			case <-watchCtx.Done():
			}
		}); err != nil {
			e.log.Error("config source stopped", "err", err)
		}
	}()
	// A document refused for a reason outside it (a TLS Secret not created
	// yet, control unreachable) is retried with backoff until it applies or
	// a new document arrives.
	var retryDoc []byte
	backoff := minRetry
	retry := time.NewTimer(time.Hour)
	retry.Stop()
	defer retry.Stop()
	tlsRefresh := time.NewTicker(e.opts.TLSRefreshInterval)
	defer tlsRefresh.Stop()
	for {
		select {
		case <-ctx.Done():
			e.drain(local)
			return nil
		case doc := <-docs:
			retryDoc, backoff = nil, minRetry
			retry.Stop()
			if e.onConfig(ctx, doc) {
				retryDoc = doc
				retry.Reset(backoff)
			}
		case <-e.groupWake:
			e.refreshGroup(ctx)
		case <-tlsRefresh.C:
			// In this loop, so it never races with applying a new config.
			e.refreshTLSSecret(ctx)
			e.refreshGatewayCerts(ctx)
		case <-retry.C:
			if retryDoc != nil && e.onConfig(ctx, retryDoc) {
				backoff = min(2*backoff, maxRetry)
				retry.Reset(backoff)
			} else {
				retryDoc = nil
			}
		}
	}
}

// Backoff bounds for retrying a config refused at apply time.
const (
	minRetry = 2 * time.Second
	maxRetry = time.Minute
)

// onConfig parses, validates and applies one document; on any failure the
// previous config (if any) keeps serving and the reason goes to
// config_error. A config applied without some of its listeners serves the
// rest, and says which did not open in config_error. It reports whether
// the failure may pass by itself (so a retry makes sense): true for
// apply-time errors and skipped listeners, false for invalid documents
// and success.
func (e *Engine) onConfig(ctx context.Context, doc []byte) (retry bool) {
	cfg, err := config.Parse(doc)
	if err == nil {
		err = e.checkIdentity(cfg)
	}
	if err == nil {
		retry = true
		err = e.ensureNode(ctx, cfg)
	}
	var skipped error
	if err == nil {
		skipped, err = e.apply(ctx, cfg)
	}
	if err == nil {
		err = e.rename(ctx, cfg.Hostname)
		e.setStaticEndpoints(e.node, cfg)
	}
	if err == nil {
		err = e.advertise(ctx, e.node, cfg)
	}
	if err != nil {
		e.metrics.ConfigReloads.WithLabelValues("refused").Inc()
		if e.current != nil {
			e.log.Error("config refused; the previous config keeps serving", "err", err)
		} else {
			e.log.Error("config refused; nothing is served until a config applies", "err", err)
		}
		e.writeConfigError(ctx, err.Error())
		return retry
	}
	prev := e.current
	e.current = cfg
	if isGroupRole(cfg.Role) && !e.hostReady {
		// Not ready until hostReadiness says so (refreshGroup, below).
		e.hostWait.Store(true)
	}
	e.active.Store(true)
	e.metrics.ConfigReloads.WithLabelValues("applied").Inc()
	if skipped != nil {
		e.log.Warn("config applied without the listeners that did not open; the rest serves, and they are tried again",
			"role", cfg.Role, "hostname", cfg.Hostname, "err", skipped)
		e.writeConfigServing(ctx, skipped.Error())
		e.refreshGroup(ctx)
		return true
	}
	if onlyKeyLeft(prev, cfg) {
		// The operator drops the spent auth key once the device exists:
		// the same config again, not a second apply to tell about.
		e.log.Debug("config applied again without its spent auth key")
	} else {
		e.log.Info("config applied", "role", cfg.Role, "hostname", cfg.Hostname)
	}
	e.writeConfigServing(ctx, "")
	e.refreshGroup(ctx)
	return false
}

// onlyKeyLeft reports whether next is prev without its auth key.
func onlyKeyLeft(prev, next *config.Config) bool {
	if prev == nil || prev.AuthKey == "" || next.AuthKey != "" {
		return false
	}
	p := *prev
	p.AuthKey = ""
	return reflect.DeepEqual(&p, next)
}

// checkIdentity refuses changes that would need a new tailnet node. A new
// hostname does not: rename applies it to the running node.
func (e *Engine) checkIdentity(cfg *config.Config) error {
	cur := e.current
	if cur == nil || e.node == nil {
		return nil
	}
	if cfg.LoginServer != cur.LoginServer {
		return fmt.Errorf("loginServer: cannot change from %q to %q while running; restart the proxy", cur.LoginServer, cfg.LoginServer)
	}
	if fmt.Sprint(cfg.Tags) != fmt.Sprint(cur.Tags) {
		return fmt.Errorf("tags: cannot change from %v to %v while running; restart the proxy", cur.Tags, cfg.Tags)
	}
	return nil
}

// writeConfigError records a refused config.
func (e *Engine) writeConfigError(ctx context.Context, msg string) {
	if e.opts.Status == nil {
		return
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := e.opts.Status.SetConfigError(wctx, msg); err != nil {
		e.log.Warn("cannot record config_error", "err", err)
	}
}

// writeConfigServing records an applied config, with what of it does not
// serve ("" when all of it does).
func (e *Engine) writeConfigServing(ctx context.Context, problem string) {
	if e.opts.Status == nil {
		return
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := e.opts.Status.SetConfigServing(wctx, problem); err != nil {
		e.log.Warn("cannot record config_applied", "err", err)
	}
}

// drain stops accepting, waits for in-flight requests and connections up
// to DrainTimeout, then closes the node.
func (e *Engine) drain(local *http.Server) {
	e.active.Store(false)
	e.withdrawServices()
	e.log.Info("draining", "timeout", e.opts.DrainTimeout)
	ctx, cancel := context.WithTimeout(context.Background(), e.opts.DrainTimeout)
	defer cancel()
	var wg sync.WaitGroup
	for key, h := range e.listen {
		wg.Add(1)
		go func() { defer wg.Done(); h.shutdown(ctx) }()
		delete(e.listen, key)
	}
	wg.Wait()
	if err := e.ingress.Wait(ctx); err != nil {
		e.log.Warn("L4 connections still open at the end of the drain", "err", err)
	}
	if err := e.egress.Wait(ctx); err != nil {
		e.log.Warn("egress connections still open at the end of the drain", "err", err)
	}
	e.hardCancel()
	if e.node != nil {
		e.recordPeersAtStop()
		close(e.nodeDone)
		e.status.Store(nil)
		e.node.Close()
	}
	_ = local.Shutdown(ctx)
	e.wg.Wait()
	e.log.Info("stopped")
}
