package proxy

import (
	"context"
	"crypto/tls"
	"strings"
	"time"

	"github.com/tailplane/tailplane/proxy/config"
)

// certWarmTimeout bounds the background certificate fetch.
const certWarmTimeout = 2 * time.Minute

// warmCert fetches the node's tailnet certificate in the background as soon
// as an L7 config with tailscale-cert is active. Otherwise the first client
// handshake pays for the ACME issuance (seconds), even when the answer is a
// 503 that the proxy knew before any request came. It runs once per
// hostname (a rename needs the new name's certificate); only the Run
// goroutine calls it.
func (e *Engine) warmCert(cfg *config.Config) {
	if cfg.L7 == nil || cfg.L7.TLS.EffectiveMode() != config.TLSTailscaleCert || e.node == nil || e.certWarmed == cfg.Hostname {
		return
	}
	node, hostname := e.node, cfg.Hostname
	e.certWarmed = hostname
	lc, err := node.LocalClient()
	if err != nil {
		e.log.Warn("cannot fetch the certificate ahead of the first request", "err", err)
		return
	}
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		ctx, cancel := context.WithTimeout(e.hard, certWarmTimeout)
		defer cancel()
		// The cert domain comes with the netmap, just after login or a
		// rename: wait for the one of this hostname.
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for {
			for _, d := range node.CertDomains() {
				if first, _, _ := strings.Cut(d, "."); !strings.EqualFold(first, hostname) {
					continue
				}
				start := time.Now()
				crt, key, err := lc.CertPair(ctx, d)
				if err != nil {
					if ctx.Err() == nil {
						e.metrics.CertificateFailed(d)
					}
					e.log.Warn("fetching the certificate ahead of the first request failed; the first request will try again", "domain", d, "err", err)
					return
				}
				if pair, err := tls.X509KeyPair(crt, key); err == nil {
					e.metrics.CertificateObtained(d, pair.Leaf)
				}
				e.log.Info("certificate ready", "domain", d, "took", time.Since(start).Round(time.Millisecond))
				return
			}
			select {
			case <-ctx.Done():
				e.log.Warn("no certificate domain for the hostname yet; the first request will fetch the certificate", "hostname", hostname)
				return
			case <-tick.C:
			}
		}
	}()
}
