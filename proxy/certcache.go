package proxy

import (
	"crypto/tls"
	"strings"
	"sync"
	"time"
)

// certCacheTTL is how long a node certificate, once looked up, serves
// handshakes before it is looked up again. The lookup (LocalAPI, the
// certificate store, PEM and key parsing, chain verification) cost about
// as much CPU as the rest of a TLS handshake; doing it once a minute
// rather than on every handshake keeps new connections cheap, and still
// lets tailscale's certificate code see the name often enough to start a
// renewal when one is due and to hand out the renewed certificate within a
// minute.
const certCacheTTL = time.Minute

// certCache serves the certificate that fetch returned for a server name
// until ttl has passed or the certificate expires, whichever comes first.
// Failures are not kept: the next handshake asks again. Only names fetch
// knows a certificate for are kept, so the map stays as small as the
// node's certificate names.
type certCache struct {
	fetch certSource
	ttl   time.Duration
	now   func() time.Time

	mu     sync.Mutex
	byName map[string]cachedCert
}

type cachedCert struct {
	cert  *tls.Certificate
	until time.Time
}

func newCertCache(fetch certSource, ttl time.Duration, now func() time.Time) *certCache {
	return &certCache{fetch: fetch, ttl: ttl, now: now, byName: map[string]cachedCert{}}
}

// get is a certSource.
func (c *certCache) get(hi *tls.ClientHelloInfo) (*tls.Certificate, error) {
	name := strings.ToLower(strings.TrimSuffix(hi.ServerName, "."))
	now := c.now()
	c.mu.Lock()
	e, ok := c.byName[name]
	c.mu.Unlock()
	if ok && now.Before(e.until) {
		return e.cert, nil
	}
	cert, err := c.fetch(hi)
	if err != nil {
		return nil, err
	}
	until := now.Add(c.ttl)
	if cert.Leaf != nil && cert.Leaf.NotAfter.Before(until) {
		until = cert.Leaf.NotAfter
	}
	c.mu.Lock()
	c.byName[name] = cachedCert{cert: cert, until: until}
	c.mu.Unlock()
	return cert, nil
}
