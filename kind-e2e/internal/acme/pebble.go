package acme

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	stdlog "log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"time"

	"github.com/charmbracelet/log"
	"github.com/letsencrypt/pebble/v2/ca"
	"github.com/letsencrypt/pebble/v2/db"
	"github.com/letsencrypt/pebble/v2/va"
	"github.com/letsencrypt/pebble/v2/wfe"
)

// CA is a running Pebble.
type CA struct {
	// DirectoryURL is the ACME directory (https, served with the caller's
	// certificate).
	DirectoryURL string
	// RootPEM is the root that signs issued certificates; clients trust it.
	RootPEM []byte

	srv *http.Server
}

// Config says where Pebble listens and how it validates.
type Config struct {
	// Addr is host:port for the ACME server ("127.0.0.1:0" for any port).
	Addr string
	// Cert is the ACME server's TLS certificate (clients must trust its CA,
	// for tailscale's cert code through SSL_CERT_FILE).
	Cert tls.Certificate
	// Resolver is the DNS server (host:port) DNS-01 TXT records are read from.
	Resolver string
	// StateDir keeps the root and the intermediate that signs certificates,
	// created on the first start and reused after, so certificates issued
	// before a restart still verify. Required.
	StateDir string
	Logger   *log.Logger
}

// Start runs Pebble in this process.
func Start(ctx context.Context, cfg Config) (*CA, error) {
	// Validate at once instead of sleeping up to 5 s per challenge, and
	// never reject a good nonce (Pebble rejects 5% by default to test clients).
	_ = os.Setenv("PEBBLE_VA_NOSLEEP", "1")
	_ = os.Setenv("PEBBLE_WFE_NONCEREJECT", "0")
	logger := stdlog.New(cfg.Logger.StandardLog().Writer(), "", 0)
	store := db.NewMemoryStore()
	authority := ca.New(logger, store, "", "ecdsa", 0, 1, map[string]ca.Profile{
		"default": {Description: "devcluster default profile"},
	})
	if cfg.StateDir == "" {
		return nil, errors.New("acme: Config.StateDir is required")
	}
	root, inter, err := loadOrCreateChain(cfg.StateDir)
	if err != nil {
		return nil, err
	}
	if err := installChain(authority, root, inter); err != nil {
		return nil, err
	}
	validator := va.New(logger, 80, 443, false, cfg.Resolver, store)
	// Retry-After of 1 s on pending authorizations and orders, not
	// Pebble's usual 3 and 5: validation runs in the background, and an
	// ACME client that polls before it ends waits that long. Tailscale's
	// client polls the order right after answering the challenge, so on a
	// busy machine a certificate took 6 s instead of 1 whenever it lost
	// that race (seen as a renamed Ingress serving under neither name for
	// 6-8 s). 1 s is the least x/crypto/acme waits anyway.
	front := wfe.New(logger, store, validator, authority, []string{"pebble.letsencrypt.org"}, false, false, 1, 1)

	rootPEM, err := fetchRoot(front.ManagementHandler())
	if err != nil {
		return nil, err
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("acme listen: %w", err)
	}
	srv := &http.Server{
		Handler:           withOrderLocation(front.Handler()),
		ReadHeaderTimeout: 10 * time.Second,
		TLSConfig:         &tls.Config{Certificates: []tls.Certificate{cfg.Cert}},
	}
	go func() { _ = srv.ServeTLS(ln, "", "") }()
	return &CA{DirectoryURL: "https://" + ln.Addr().String() + "/dir", RootPEM: rootPEM, srv: srv}, nil
}

// Close stops the ACME server.
func (c *CA) Close() { _ = c.srv.Close() }

// fetchRoot reads the issuing root as Pebble serves it.
func fetchRoot(mgmt http.Handler) ([]byte, error) {
	rec := httptest.NewRecorder()
	mgmt.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, wfe.RootCertPath+"0", nil))
	if rec.Code != http.StatusOK {
		return nil, fmt.Errorf("pebble root: %d %s", rec.Code, rec.Body.String())
	}
	return rec.Body.Bytes(), nil
}

// withOrderLocation adds the Location header Pebble leaves out of finalize
// responses; tailscale's ACME client needs it to poll the order
// ("CreateOrder: Post \"\": unsupported protocol scheme").
func withOrderLocation(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if id, ok := strings.CutPrefix(r.URL.Path, "/finalize-order/"); ok && w.Header().Get("Location") == "" {
			w.Header().Set("Location", "https://"+r.Host+"/my-order/"+id)
		}
		next.ServeHTTP(w, r)
	})
}
