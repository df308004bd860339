package proxy

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/tailplane/tailplane/internal/proxystate"
	"github.com/tailplane/tailplane/proxy/config"
)

// listenRetry is how soon a Tailscale Service listener that failed to open
// is tried again.
const listenRetry = 2 * time.Second

// refreshGroup brings the ingress-group role in line with what it can
// serve now: it opens the listeners that were missing (UDP ports of
// addresses control just assigned, listeners that failed), starts the
// certificate issuers, advertises exactly the services it can serve and
// reports each one. It runs on the Run goroutine after every config and
// whenever a certificate Secret or the service addresses change.
func (e *Engine) refreshGroup(ctx context.Context) {
	cfg := e.current
	if cfg == nil || !isGroupRole(cfg.Role) || e.node == nil {
		if len(e.servicesReported) > 0 {
			// The replica left the role: it hosts nothing any more.
			e.writeServiceReport(ctx, map[string]proxystate.ServiceReport{})
		}
		return
	}
	e.reopenGroup(ctx, cfg)

	now := time.Now()
	report := map[string]proxystate.ServiceReport{}
	ports := map[string][]uint16{}
	var names []string
	issuing := map[string]string{} // certificate Secret -> domain
	certWait := false              // a service waits for its certificate
	for _, s := range groupServices(cfg) {
		err := e.groupErrs[s.Name]
		if err == nil {
			err = e.listenErrs[s.Name]
		}
		if t, shared := sharedTLS(s); err == nil && shared {
			domain := e.serviceDomain(s.Name)
			c := e.group[s.Name].cert.Load()
			if t.Issue {
				// The issuer advertises at once: control grants the
				// certificate name only to a host of the service.
				issuing[c.secret] = domain
			} else if uerr := c.cur.Load().usableFor(domain, now); uerr != nil {
				err = fmt.Errorf("waiting for the certificate: Secret %s/%s %v (the issuing replica writes it)", e.opts.Namespace, c.secret, uerr)
				certWait = true
			}
		}
		if err != nil {
			report[s.Name] = proxystate.ServiceReport{Error: err.Error()}
			continue
		}
		names = append(names, s.Name)
		ports[s.Name] = tcpPorts(s)
		report[s.Name] = proxystate.ServiceReport{Advertised: true}
	}
	for secret, c := range e.sharedCerts {
		if domain, ok := issuing[secret]; ok {
			e.startIssuer(c, domain)
		} else if c.issuer != nil {
			c.issuer()
			c.issuer, c.issuerDomain = nil, ""
		}
	}
	slices.Sort(names)
	if !slices.Equal(names, e.servicesAdvertised) || !maps.EqualFunc(ports, e.servicesPorts, slices.Equal) {
		actx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := e.advertiseServices(actx, names, ports)
		cancel()
		if err != nil {
			e.log.Error("cannot advertise Tailscale Services; retrying", "services", names, "err", err)
			for _, n := range names {
				report[n] = proxystate.ServiceReport{Error: err.Error()}
			}
			time.AfterFunc(listenRetry, e.wakeGroup)
		} else {
			e.log.Info("advertising Tailscale Services", "services", names)
			e.servicesAdvertised, e.servicesPorts = names, ports
		}
	}
	if len(e.listenErrs) > 0 {
		time.AfterFunc(listenRetry, e.wakeGroup)
	}
	e.hostReadiness(certWait)
	e.writeServiceReport(ctx, report)
}

// hostGrace bounds how long a group replica waits, after it starts, for
// control to route what it advertises to it before it reports ready
// anyway: control may never (a service the tailnet policy does not
// approve), and that is the member's condition to show, not the group's.
const hostGrace = 30 * time.Second

// hostReadiness holds the replica's readiness (/healthz) after a start
// until control routes every Tailscale Service it advertises to it (the
// service-host capability names them) and no service waits for its
// certificate, or until hostGrace. Without the wait a restarted replica
// would be Ready while control still routes its services elsewhere, and a
// rolling restart would then stop the other replica with no host left.
// Once over, the wait does not come back for this process: services
// added later do not make a serving replica unready.
func (e *Engine) hostReadiness(certWait bool) {
	if e.hostReady {
		return
	}
	if e.hostWaitStart.IsZero() {
		e.hostWaitStart = time.Now()
		e.hostWait.Store(true)
	}
	vips := e.vips.Load()
	var missing []string
	for _, n := range e.servicesAdvertised {
		if vips == nil || len(vips.byService[n]) == 0 {
			missing = append(missing, n)
		}
	}
	waited := time.Since(e.hostWaitStart)
	switch {
	case len(missing) == 0 && !certWait:
		if len(e.servicesAdvertised) > 0 {
			e.log.Info("control routes this replica's Tailscale Services to it: ready", "services", e.servicesAdvertised, "waited", waited.Round(time.Millisecond))
		}
	case waited >= hostGrace:
		e.log.Warn("control does not route every advertised Tailscale Service to this replica yet: ready anyway", "missing", missing, "waiting for certificate", certWait, "waited", waited.Round(time.Second))
	default:
		if !e.hostWake {
			e.hostWake = true
			time.AfterFunc(hostGrace-waited, e.wakeGroup)
		}
		return
	}
	e.hostReady = true
	e.hostWait.Store(false)
}

// reopenGroup opens the group listeners that are missing for the current
// services and closes those no longer wanted (UDP on addresses control
// took back); listener errors are kept per service.
func (e *Engine) reopenGroup(ctx context.Context, cfg *config.Config) {
	specs := e.groupSpecs(cfg, e.group)
	opened, failed, skipped := e.openListeners(ctx, specs)
	if skipped != nil { // only non-service specs are skipped; there are none
		e.log.Error("cannot open listeners", "err", skipped)
	}
	e.listenErrs = failed
	if len(opened) == 0 && !e.hasStale(specs) {
		return
	}
	e.adoptListeners(specs, opened)
}

// hasStale reports whether a group listener is open that specs no longer
// want.
func (e *Engine) hasStale(specs []listenerSpec) bool {
	want := map[string]bool{}
	for _, s := range specs {
		want[s.key] = true
	}
	for k := range e.listen {
		if !want[k] {
			return true
		}
	}
	return false
}

// withdrawServices stops advertising every Tailscale Service before the
// node goes away, so control moves clients to the other replicas before
// this one stops answering.
func (e *Engine) withdrawServices() {
	if e.node == nil || len(e.servicesAdvertised) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if err := e.advertiseServices(ctx, nil, nil); err != nil {
		e.log.Warn("cannot withdraw the Tailscale Services before stopping", "err", err)
		return
	}
	e.servicesAdvertised, e.servicesPorts = nil, nil
}

// writeServiceReport records report under KeyServices when it changed.
func (e *Engine) writeServiceReport(ctx context.Context, report map[string]proxystate.ServiceReport) {
	if maps.Equal(report, e.servicesReported) || e.opts.Status == nil {
		return
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := e.opts.Status.SetServices(wctx, report); err != nil {
		e.log.Warn("cannot record the Tailscale Services report; retrying", "err", err)
		time.AfterFunc(listenRetry, e.wakeGroup)
		return
	}
	e.servicesReported = report
}
