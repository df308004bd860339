package proxy

import (
	"context"
	"time"

	"github.com/tailplane/tailplane/proxy/config"
)

// certWarmTimeout bounds the background certificate fetch.
const certWarmTimeout = 2 * time.Minute

// warmCert fetches the node's tailnet certificate in the background as soon
// as an L7 config with tailscale-cert is active. Otherwise the first client
// handshake pays for the ACME issuance (seconds), even when the answer is a
// 503 that the proxy knew before any request came. It runs once per node;
// only the Run goroutine calls it.
func (e *Engine) warmCert(cfg *config.Config) {
	if cfg.L7 == nil || cfg.L7.TLS.EffectiveMode() != config.TLSTailscaleCert || e.node == nil || e.certWarmed == e.node {
		return
	}
	node := e.node
	e.certWarmed = node
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
		// The cert domains arrive with the netmap, just after login.
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		domains := node.CertDomains()
		for len(domains) == 0 {
			select {
			case <-ctx.Done():
				e.log.Warn("no certificate domain for the node; the first request will fetch the certificate")
				return
			case <-tick.C:
				domains = node.CertDomains()
			}
		}
		for _, d := range domains {
			start := time.Now()
			if _, _, err := lc.CertPair(ctx, d); err != nil {
				e.log.Warn("fetching the certificate ahead of the first request failed; the first request will try again", "domain", d, "err", err)
				continue
			}
			e.log.Info("certificate ready", "domain", d, "took", time.Since(start).Round(time.Millisecond))
		}
	}()
}
