package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/charmbracelet/log"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/kubernetes"
	"tailscale.com/client/local"
	"tailscale.com/ipn"
	"tailscale.com/tsnet"

	devicekeys "github.com/tailplane/tailplane/handlers/lib/device"
	"github.com/tailplane/tailplane/internal/tailnet"
	"github.com/tailplane/tailplane/internal/tslog"
)

// The operator's own tailnet device, as the official operator has one: a
// tsnet node named OPERATOR_HOSTNAME whose auth key carries
// OPERATOR_INITIAL_TAGS, with its state in Secret OPERATOR_SECRET. Its
// stable node ID is what Tailscale Services' owner references need; with
// APISERVER_PROXY it serves the API server proxy (apiserverproxy.go).

const (
	// defaultDeviceTimeout bounds the wait for the device to be Running:
	// long enough to ride out a short control-plane outage, short enough
	// that a wrong login server shows up as restarts with a clear reason.
	defaultDeviceTimeout = 5 * time.Minute
	// waitingLogInterval spaces the "not running yet" lines.
	waitingLogInterval = 10 * time.Second
	// sharedMemoryDir is a tmpfs that container runtimes mount writable even
	// in containers with a read-only root file system.
	sharedMemoryDir = "/dev/shm"
)

// deviceConfig is what the device needs from the settings.
type deviceConfig struct {
	Hostname string
	// Tags are the initial tags: those of the auth key minted for a new
	// device. An existing device keeps the tags it was created with.
	Tags []string
	// ControlURL is the login server.
	ControlURL string
	// Port is the WireGuard UDP port (0: any).
	Port uint16
	// Namespace and Secret name the state Secret; an empty Secret keeps
	// the state in a file in the scratch folder, lost on restart.
	Namespace, Secret string
	Kube              kubernetes.Interface
	Backend           tailnet.Backend
	// TempDir is where the scratch folder tsnet needs is made.
	TempDir string
	// Timeout bounds the wait until Running.
	Timeout time.Duration
	Log     *log.Logger
	// TsnetDebug shows tsnet's internal log (TAILPLANE_TSNET_LOG_LEVEL).
	TsnetDebug bool
}

// deviceInfo is the running device as its node sees itself.
type deviceInfo struct {
	NodeID string   `json:"nodeID"`
	Name   string   `json:"name"`
	IPs    []string `json:"ips"`
}

// device runs the operator's tsnet node.
type device struct {
	cfg     deviceConfig
	info    *prometheus.GaugeVec
	startup prometheus.Gauge

	mu      sync.Mutex
	srv     *tsnet.Server
	dir     string
	state   string
	lastErr string
	health  []string
	running *deviceInfo
}

func newDevice(cfg deviceConfig) *device {
	return &device{
		cfg: cfg, state: "NotStarted",
		info: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "tailplane_operator_tailnet_device_info",
			Help: "The operator's own tailnet device (1 once Running), by hostname, MagicDNS name, tailnet IPs and stable node ID.",
		}, []string{"hostname", "name", "ips", "node_id"}),
		startup: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "tailplane_operator_tailnet_device_startup_seconds",
			Help: "Seconds from the start of the operator's tailnet device until it was Running.",
		}),
	}
}

// collectors are the device's metrics.
func (d *device) collectors() []prometheus.Collector {
	return []prometheus.Collector{d.info, d.startup}
}

// up starts the node, minting an auth key only when the state holds no
// node yet, and waits until it is Running, within cfg.Timeout.
func (d *device) up(ctx context.Context) (deviceInfo, error) {
	began := time.Now()
	ctx, cancel := context.WithTimeout(ctx, d.cfg.Timeout)
	defer cancel()
	dir, err := scratchDir(d.cfg.TempDir)
	if err != nil {
		return deviceInfo{}, err
	}
	d.mu.Lock()
	d.dir = dir
	d.mu.Unlock()
	st, err := d.stateStore(ctx, dir)
	if err != nil {
		return deviceInfo{}, err
	}
	known, tags, err := existingNode(st)
	if err != nil {
		return deviceInfo{}, fmt.Errorf("read the device state in %s: %w", d.stateName(), err)
	}
	var authKey string
	if !known {
		if authKey, err = d.mintKey(ctx); err != nil {
			return deviceInfo{}, err
		}
		tags = d.cfg.Tags
	}
	d.cfg.Log.Info("joining the tailnet", "hostname", d.cfg.Hostname, "loginServer", d.cfg.ControlURL,
		"state", d.stateName(), "newDevice", !known, "timeout", d.cfg.Timeout)
	srv := &tsnet.Server{
		Dir: dir, Store: st, Hostname: d.cfg.Hostname, ControlURL: d.cfg.ControlURL, Port: d.cfg.Port,
		AuthKey: authKey, AdvertiseTags: tags,
	}
	tl := tslog.NewTsnet(d.cfg.Log, d.cfg.TsnetDebug)
	srv.Logf, srv.UserLogf = tl.Logf, tl.UserLogf
	if err := srv.Start(); err != nil {
		return deviceInfo{}, fmt.Errorf("start the tailnet node %q: %w", d.cfg.Hostname, err)
	}
	d.mu.Lock()
	d.srv = srv
	d.mu.Unlock()
	lc, err := srv.LocalClient()
	if err != nil {
		return deviceInfo{}, fmt.Errorf("tailnet node %q: %w", d.cfg.Hostname, err)
	}
	info, err := d.waitRunning(ctx, lc, authKey != "")
	if err != nil {
		return deviceInfo{}, err
	}
	if authKey != "" {
		if err := d.revokeUnusedKeys(ctx); err != nil {
			// The device runs; a leftover key is found again next time.
			d.cfg.Log.Warn("cannot revoke the operator device's unused auth keys", "err", err)
		}
	}
	took := time.Since(began)
	d.info.WithLabelValues(d.cfg.Hostname, info.Name, strings.Join(info.IPs, ","), info.NodeID).Set(1)
	d.startup.Set(took.Seconds())
	d.cfg.Log.Info("the operator's tailnet device is running", "hostname", d.cfg.Hostname, "name", info.Name,
		"ips", strings.Join(info.IPs, ","), "nodeID", info.NodeID, "took", took.Round(time.Millisecond))
	return info, nil
}

// keyDescription is the description of the operator device's auth keys, so
// that a key minted before a crash (and never used) is found and revoked.
func (d *device) keyDescription() string {
	desc := "tailplane operator " + d.cfg.Hostname
	return desc[:min(len(desc), tailnet.MaxKeyDescription)]
}

// keys are the operator device's auth keys: the repository's one key path
// (handlers/lib/device).
func (d *device) keys() devicekeys.Keys {
	return devicekeys.Keys{Backend: d.cfg.Backend, Log: d.cfg.Log, Of: "the operator's device"}
}

// mintKey mints the auth key of a new device, as the official operator
// does: preauthorized, single-use, not ephemeral, with the initial tags.
// Keys minted for it earlier that can still create a device (an operator
// that died before its device joined) are revoked first. Rate limits,
// server and network errors are retried until ctx ends; a refusal (tags,
// scopes) is returned at once.
func (d *device) mintKey(ctx context.Context) (string, error) {
	backoff := time.Second
	for {
		k, err := d.keys().Mint(ctx, d.keyDescription(), d.cfg.Tags)
		if err == nil {
			return k.Key, nil
		}
		err = fmt.Errorf("mint the auth key of the operator's tailnet device (tags %s): %w", strings.Join(d.cfg.Tags, ","), err)
		if !tailnet.Temporary(err) {
			return "", err
		}
		d.cfg.Log.Warn("retrying", "err", err, "in", backoff)
		select {
		case <-ctx.Done():
			return "", err
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 30*time.Second)
	}
}

// revokeUnusedKeys revokes the operator device's keys that can still create
// a device: before a new one is minted, and once the device joined (its own
// key is spent by then).
func (d *device) revokeUnusedKeys(ctx context.Context) error {
	desc := d.keyDescription()
	return d.keys().RevokeUnused(ctx, func(s string) bool { return s == desc })
}

// waitRunning follows the node's state until Running. A node that needs a
// login although no key was used in this run (its device was deleted, or it
// never finished joining) gets a freshly minted key.
func (d *device) waitRunning(ctx context.Context, lc *local.Client, keyUsed bool) (deviceInfo, error) {
	go d.reportWaiting(ctx, lc)
	w, err := lc.WatchIPNBus(ctx, ipn.NotifyInitialState)
	if err != nil {
		return deviceInfo{}, d.waitError(ctx, err)
	}
	defer w.Close()
	for {
		n, err := w.Next()
		if err != nil {
			return deviceInfo{}, d.waitError(ctx, err)
		}
		if n.ErrMessage != nil {
			d.setErr(*n.ErrMessage)
		}
		if n.State == nil {
			continue
		}
		d.setState(n.State.String())
		switch *n.State {
		case ipn.NeedsLogin:
			if keyUsed {
				continue // a key login in progress passes through NeedsLogin
			}
			keyUsed = true
			if err := d.relogin(ctx, lc); err != nil {
				return deviceInfo{}, err
			}
		case ipn.NeedsMachineAuth:
			d.setErr("the device waits for approval in the admin console (Machines page): the auth key should have been preauthorized")
		case ipn.Running:
			st, err := lc.StatusWithoutPeers(ctx)
			if err != nil {
				return deviceInfo{}, d.waitError(ctx, err)
			}
			if st.Self == nil || len(st.TailscaleIPs) == 0 {
				continue
			}
			info := deviceInfo{NodeID: string(st.Self.ID), Name: strings.TrimSuffix(st.Self.DNSName, ".")}
			for _, ip := range st.TailscaleIPs {
				info.IPs = append(info.IPs, ip.String())
			}
			d.mu.Lock()
			d.running = &info
			d.mu.Unlock()
			return info, nil
		}
	}
}

// relogin logs an existing node in again with a new key and the initial
// tags.
func (d *device) relogin(ctx context.Context, lc *local.Client) error {
	d.cfg.Log.Warn("the operator's tailnet device needs a login although its state has a node (deleted device?); minting a new auth key",
		"hostname", d.cfg.Hostname, "state", d.stateName())
	key, err := d.mintKey(ctx)
	if err != nil {
		return err
	}
	prefs := ipn.NewPrefs()
	prefs.Hostname, prefs.WantRunning, prefs.ControlURL, prefs.AdvertiseTags = d.cfg.Hostname, true, d.cfg.ControlURL, d.cfg.Tags
	if err := lc.Start(ctx, ipn.Options{AuthKey: key, UpdatePrefs: prefs}); err != nil {
		return fmt.Errorf("log the operator's tailnet device in: %w", err)
	}
	if err := lc.StartLoginInteractive(ctx); err != nil {
		return fmt.Errorf("log the operator's tailnet device in: %w", err)
	}
	return nil
}

// reportWaiting logs, until ctx ends or the node runs, why it is not
// running yet, with the node's own health warnings.
func (d *device) reportWaiting(ctx context.Context, lc *local.Client) {
	began := time.Now()
	tick := time.NewTicker(min(waitingLogInterval, d.cfg.Timeout/3))
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		d.mu.Lock()
		state, lastErr, done := d.state, d.lastErr, d.running != nil
		d.mu.Unlock()
		if done {
			return
		}
		var health []string
		if st, err := lc.StatusWithoutPeers(ctx); err == nil {
			health = st.Health
			d.mu.Lock()
			d.health = health
			d.mu.Unlock()
		}
		d.cfg.Log.Warn("the operator's tailnet device is not running yet; handlers wait for it and /readyz fails",
			"hostname", d.cfg.Hostname, "loginServer", d.cfg.ControlURL, "state", state, "waited", time.Since(began).Round(time.Second),
			"timeout", d.cfg.Timeout, "lastError", lastErr, "health", strings.Join(health, "; "))
	}
}

// waitError says why the wait ended without a running node.
func (d *device) waitError(ctx context.Context, err error) error {
	d.mu.Lock()
	state, lastErr, health := d.state, d.lastErr, d.health
	d.mu.Unlock()
	detail := "last state " + state
	if lastErr != "" {
		detail += ", last error: " + lastErr
	}
	if len(health) > 0 {
		detail += ", health: " + strings.Join(health, "; ")
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("the operator's tailnet device %q did not reach Running within %s (is the login server %s reachable? %s)",
			d.cfg.Hostname, d.cfg.Timeout, d.cfg.ControlURL, detail)
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return fmt.Errorf("the operator's tailnet device %q: %w (%s)", d.cfg.Hostname, err, detail)
}

func (d *device) setState(s string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.state = s
}

func (d *device) setErr(msg string) {
	d.mu.Lock()
	changed := d.lastErr != msg
	d.lastErr = msg
	d.mu.Unlock()
	if changed {
		d.cfg.Log.Warn("the operator's tailnet device reports a problem", "hostname", d.cfg.Hostname, "err", msg)
	}
}

// probe is the device's entry in /healthz. It never fails: a device that is
// not up yet must not get the operator restarted by its liveness probe
// (/readyz fails meanwhile, and the wait is bounded).
func (d *device) probe(context.Context) (any, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := map[string]any{"hostname": d.cfg.Hostname, "state": d.state}
	if d.lastErr != "" && d.running == nil {
		out["lastError"] = d.lastErr
	}
	if d.running != nil {
		out["nodeID"], out["name"], out["ips"] = d.running.NodeID, d.running.Name, d.running.IPs
	}
	return out, nil
}

// server is the running node, or nil.
func (d *device) server() *tsnet.Server {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.srv
}

// close stops the node and removes the scratch folder; up may start it
// again (the next term of leadership).
func (d *device) close() {
	d.mu.Lock()
	srv, dir := d.srv, d.dir
	d.srv, d.dir = nil, ""
	if srv != nil {
		d.state, d.running = "Stopped", nil
		d.info.Reset()
	}
	d.mu.Unlock()
	if srv != nil {
		if err := srv.Close(); err != nil {
			d.cfg.Log.Warn("stopping the operator's tailnet device", "err", err)
		}
	}
	if dir != "" {
		_ = os.RemoveAll(dir)
	}
}
