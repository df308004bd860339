package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/charmbracelet/log"

	"github.com/tailplane/tailplane/kind-e2e/internal/headscale"
	"github.com/tailplane/tailplane/kind-e2e/internal/tailnet"
)

// The control servers of --control.
const (
	controlDevcluster = "devcluster"
	controlHeadscale  = "headscale"
)

// headscaleDomain is the MagicDNS suffix of Headscale's nodes.
const headscaleDomain = "headscale.devcluster.test"

// startHeadscale runs Headscale (--headscale, default the headscale binary
// next to devcluster's, which go tool task test:headscale puts there) with
// devcluster's DERP/STUN relay and the --policy file (translated for
// Headscale; the --group members become Headscale users), and returns the first
// lines of tailnet.env for it: the control server, Headscale's API and an
// API key (HEADSCALE_URL, HEADSCALE_API_KEY: the operator's
// HEADSCALE_URL and the key of its HEADSCALE_API_KEY_FILE).
func startHeadscale(ctx context.Context, dir, host string, o tailnetOptions, logger *log.Logger) (*tailnetStack, []string, error) {
	bin := o.headscaleBin
	if bin == "" {
		self, err := os.Executable()
		if err != nil {
			return nil, nil, err
		}
		bin = filepath.Join(filepath.Dir(self), "headscale")
	}
	if _, err := os.Stat(bin); err != nil {
		return nil, nil, fmt.Errorf("--control headscale: no headscale binary at %s (go tool task test:headscale builds it; or pass --headscale BIN)", bin)
	}
	relayLog := logger.WithPrefix("derp")
	relay, derpMap, err := tailnet.StartRelay(ctx, host, func(format string, args ...any) { relayLog.Debugf(format, args...) })
	if err != nil {
		return nil, nil, fmt.Errorf("DERP relay: %w", err)
	}
	hs, err := headscale.Start(ctx, headscale.Config{Binary: bin, Dir: filepath.Join(dir, "headscale"), Host: host,
		BaseDomain: headscaleDomain, Policy: o.policy, Groups: o.groups, DERPMap: derpMap, Logger: logger.WithPrefix("headscale")})
	if err != nil {
		relay.Close()
		return nil, nil, err
	}
	lines := []string{
		"# devcluster tailnet on Headscale (devcluster up --control headscale); source this file or read it as KEY=VALUE lines.",
		"TS_CONTROL=" + controlHeadscale,
		"TS_CONTROL_URL=" + hs.URL,
		"TS_MAGICDNS_DOMAIN=" + headscaleDomain,
		"# Headscale's REST API (/api/v1) and an API key for it: the operator's",
		"# HEADSCALE_URL and the content of its HEADSCALE_API_KEY_FILE.",
		"HEADSCALE_URL=" + hs.URL,
		"HEADSCALE_API_KEY=" + hs.APIKey,
		"# The headscale CLI: headscale -c $HEADSCALE_CONFIG nodes list",
		"HEADSCALE_CONFIG=" + hs.ConfigFile,
	}
	return &tailnetStack{hs: hs, relay: relay}, lines, nil
}

// checkControl validates --control against the other tailnet flags.
func (o *tailnetOptions) checkControl() error {
	o.control = cmp.Or(o.control, controlDevcluster)
	switch o.control {
	case controlDevcluster:
		if o.headscaleBin != "" {
			return errors.New("--headscale needs --control headscale")
		}
	case controlHeadscale:
		if o.tailnets > 1 {
			return errors.New("--tailnets 2 needs --control devcluster (Headscale runs one tailnet)")
		}
	default:
		return fmt.Errorf("--control %q: want devcluster or headscale", o.control)
	}
	return nil
}
