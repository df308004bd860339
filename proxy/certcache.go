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
	// observe, when set, learns of every fetch: the certificate or the
	// error (metrics).
	observe func(name string, cert *tls.Certificate, err error)

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
	if c.observe != nil && name != "" {
		c.observe(name, cert, err)
	}
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

// onlyNames serves handshakes for the names names returns (the node's
// certificate names) from next. A handshake for any other server name gets
// the unrecognized_name alert (a nil certificate and no error make
// crypto/tls send it) rather than internal_error: after a rename, a client
// still using the old name reads "tls: unrecognized name" instead of a
// server fault. A handshake without a server name goes to next as before.
func onlyNames(names func() []string, next certSource) certSource {
	return func(hi *tls.ClientHelloInfo) (*tls.Certificate, error) {
		if hi.ServerName == "" {
			return next(hi)
		}
		want := strings.TrimSuffix(hi.ServerName, ".")
		for _, n := range names() {
			if strings.EqualFold(strings.TrimSuffix(n, "."), want) {
				return next(hi)
			}
		}
		return nil, nil
	}
}
