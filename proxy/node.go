package proxy

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"time"

	"tailscale.com/ipn"
	"tailscale.com/ipn/ipnstate"
	"tailscale.com/tsnet"
	"tailscale.com/types/views"
	"tailscale.com/wgengine/netstack"

	"github.com/tailplane/tailplane/internal/kubestate"
	"github.com/tailplane/tailplane/internal/tslog"
	"github.com/tailplane/tailplane/proxy/config"
	"github.com/tailplane/tailplane/proxy/route"
)

// upTimeout bounds the first login so that a bad auth key is refused
// instead of hanging the config loop.
const upTimeout = 2 * time.Minute

// ensureNode starts the tsnet node for the first accepted config. A failed
// login (e.g. a wrong auth key) is a refusal; the next config tries again.
func (e *Engine) ensureNode(ctx context.Context, cfg *config.Config) error {
	if e.node != nil {
		return nil
	}
	node := &tsnet.Server{
		Dir:           e.opts.StateDir,
		Store:         e.opts.State,
		Hostname:      cfg.Hostname,
		ControlURL:    cfg.LoginServer,
		AuthKey:       cfg.AuthKey,
		AdvertiseTags: cfg.Tags,
		Ephemeral:     e.opts.Ephemeral,
		Port:          uint16(cfg.ListenPort),
	}
	tl := tslog.NewTsnet(e.log, e.opts.TsnetDebug)
	node.Logf, node.UserLogf = tl.Logf, tl.UserLogf
	if err := node.Start(); err != nil {
		// A node that failed to start has nothing to close.
		return fmt.Errorf("start tailnet node %q: %w", cfg.Hostname, err)
	}
	e.advertised = nil
	if err := e.installForwarding(node); err != nil {
		node.Close()
		return fmt.Errorf("start tailnet node %q: %w", cfg.Hostname, err)
	}
	if err := shortenTimeWait(node.Sys().Netstack.Get().(*netstack.Impl)); err != nil {
		node.Close()
		return fmt.Errorf("start tailnet node %q: %w", cfg.Hostname, err)
	}
	e.setStaticEndpoints(node, cfg)
	// Before login, so that the node's first map request already carries
	// its routes.
	if err := e.advertise(ctx, node, cfg); err != nil {
		node.Close()
		return err
	}
	upCtx, cancel := context.WithTimeout(ctx, upTimeout)
	defer cancel()
	st, err := node.Up(upCtx)
	if err != nil {
		node.Close()
		return fmt.Errorf("tailnet login as %q failed (check authKey and loginServer): %w", cfg.Hostname, err)
	}
	lc, err := node.LocalClient()
	if err != nil {
		node.Close()
		return fmt.Errorf("start tailnet node %q: %w", cfg.Hostname, err)
	}
	e.node = node
	e.hostname = cfg.Hostname
	// Before loggedIn, so that Ready never flips on before the pings.
	if e.opts.Peers != nil && !e.opts.NoPriming && len(e.opts.Peers.RecentPeers()) > 0 {
		e.priming.Store(true)
	}
	e.loggedIn.Store(true)
	e.status.Store(lc)
	if st.CurrentTailnet != nil {
		e.dnsSuffix = st.CurrentTailnet.MagicDNSSuffix
	}
	e.log.Info("running on the tailnet", runningKeys(st)...)
	e.nodeDone = make(chan struct{})
	e.wg.Add(3)
	go func() { defer e.wg.Done(); e.reportDevice() }()
	go func() { defer e.wg.Done(); e.watchVIPs(node) }()
	go func() { defer e.wg.Done(); e.watchPeers(lc) }()
	return nil
}

// setStaticEndpoints gives the node cfg's static endpoints, which it
// reports to control with those it finds itself.
func (e *Engine) setStaticEndpoints(node *tsnet.Server, cfg *config.Config) {
	var eps []netip.AddrPort // nil, not empty: an unchanged value costs nothing
	for _, s := range cfg.StaticEndpoints {
		if ap, err := netip.ParseAddrPort(s); err == nil { // validated with the config
			eps = append(eps, ap)
		}
	}
	if ms, ok := node.Sys().MagicSock.GetOK(); ok {
		ms.SetStaticEndpoints(views.SliceOf(eps))
	}
}

// runningKeys describe the node once it runs: name and tailnet IPs.
func runningKeys(st *ipnstate.Status) []any {
	kv := []any{"ips", fmt.Sprint(st.TailscaleIPs)}
	if st.Self != nil {
		kv = append(kv, "name", strings.TrimSuffix(st.Self.DNSName, "."), "id", st.Self.ID)
	}
	return kv
}

// rename gives the running node a new hostname, as tailscaled does when its
// config file's Hostname changes in the official proxy: the node tells
// control, which renames the device, and its MagicDNS name follows (the old
// name stops resolving). A node restarted with saved state presents the
// hostname it is started with, so the rename also survives restarts.
func (e *Engine) rename(ctx context.Context, hostname string) error {
	if e.node == nil || hostname == e.hostname {
		return nil
	}
	lc, err := e.node.LocalClient()
	if err != nil {
		return fmt.Errorf("hostname: rename the device from %q to %q: %w", e.hostname, hostname, err)
	}
	mp := &ipn.MaskedPrefs{Prefs: ipn.Prefs{Hostname: hostname}, HostnameSet: true}
	if _, err := lc.EditPrefs(ctx, mp); err != nil {
		return fmt.Errorf("hostname: rename the device from %q to %q: %w", e.hostname, hostname, err)
	}
	e.log.Info("device renamed; control gives it the new MagicDNS name", "from", e.hostname, "to", hostname)
	e.hostname = hostname
	select {
	case e.renamed <- struct{}{}:
	default:
	}
	return nil
}

// Reporting intervals of reportDevice: the usual one, and a short one for a
// while after a rename, so that the new MagicDNS name reaches the state
// Secret (and the operator's Ready) within a second of control renaming the
// device.
const (
	reportInterval       = 5 * time.Second
	renameReportInterval = 250 * time.Millisecond
	renameReportWindow   = 30 * time.Second
)

// reportDevice writes device_id, device_fqdn and device_ips after login and
// whenever they change.
func (e *Engine) reportDevice() {
	lc, err := e.node.LocalClient()
	if err != nil {
		e.log.Error("no local client; device info will not be reported", "err", err)
		return
	}
	var fastUntil time.Time
	wait := time.NewTimer(0)
	defer wait.Stop()
	for {
		select {
		case <-e.nodeDone:
			return
		case <-e.renamed:
			fastUntil = time.Now().Add(renameReportWindow)
			wait.Stop()
		case <-wait.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		st, err := lc.Status(ctx)
		if err == nil && st.Self != nil && len(st.TailscaleIPs) > 0 {
			info := kubestate.DeviceInfo{ID: string(st.Self.ID), FQDN: st.Self.DNSName}
			for _, ip := range st.TailscaleIPs {
				info.IPs = append(info.IPs, ip.String())
			}
			if prefs, err := lc.GetPrefs(ctx); err == nil {
				info.AdvertisedRoutes, info.ApprovedRoutes = routeReport(prefs.AdvertiseRoutes, st.Self.AllowedIPs)
			}
			if e.opts.Status != nil {
				if err := e.opts.Status.SetDeviceInfo(ctx, info); err != nil {
					e.log.Warn("cannot write device info", "err", err)
				}
			}
		}
		cancel()
		next := reportInterval
		if time.Now().Before(fastUntil) {
			next = renameReportInterval
		}
		wait.Reset(next)
	}
}

// routeReport returns the advertised routes and those control approved:
// an approved route is in the node's own AllowedIPs (its primary routes are
// fewer when another node advertises the same route).
func routeReport(advertised []netip.Prefix, allowed *views.Slice[netip.Prefix]) (adv, approved []string) {
	ok := map[netip.Prefix]bool{}
	if allowed != nil {
		for _, p := range allowed.All() {
			ok[p] = true
		}
	}
	for _, p := range advertised {
		adv = append(adv, p.String())
		if ok[p] {
			approved = append(approved, p.String())
		}
	}
	return adv, approved
}

// whois resolves a tailnet caller for the identity headers.
func (e *Engine) whois(ctx context.Context, remoteAddr string) (*route.Identity, error) {
	if e.node == nil {
		return nil, nil
	}
	lc, err := e.node.LocalClient()
	if err != nil {
		return nil, err
	}
	res, err := lc.WhoIs(ctx, remoteAddr)
	if err != nil {
		return nil, err
	}
	id := &route.Identity{}
	if res.Node != nil {
		id.NodeName = trimDot(res.Node.Name)
		id.Tags = res.Node.Tags
	}
	if res.UserProfile != nil {
		id.LoginName = res.UserProfile.LoginName
		id.DisplayName = res.UserProfile.DisplayName
		id.ProfilePicURL = res.UserProfile.ProfilePicURL
	}
	return id, nil
}

// dialTailnet dials a tailnet target for egress.
func (e *Engine) dialTailnet(ctx context.Context, network, address string) (net.Conn, error) {
	if e.node == nil {
		return nil, fmt.Errorf("tailnet node not started")
	}
	return e.node.Dial(ctx, network, address)
}

func trimDot(s string) string {
	if n := len(s); n > 0 && s[n-1] == '.' {
		return s[:n-1]
	}
	return s
}
