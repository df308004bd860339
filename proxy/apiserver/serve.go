package apiserver

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/charmbracelet/log"
	"k8s.io/client-go/rest"
	"tailscale.com/tsnet"
)

// ServeOptions configure Serve. Upstream, Mode and Logger are required.
type ServeOptions struct {
	Upstream *rest.Config
	Mode     Mode
	Logger   *log.Logger
	// GetCertificate serves the TLS certificate; nil uses the node's own
	// MagicDNS certificate (issued through the control server).
	GetCertificate func(*tls.ClientHelloInfo) (*tls.Certificate, error)
}

// shutdownTimeout bounds the wait for open requests when Serve stops;
// watches and exec sessions are cut after it.
const shutdownTimeout = 10 * time.Second

// Serve runs the API server proxy on port 443 of node (the operator's own
// tailnet device) until ctx ends. It returns an error only when it cannot
// start.
func Serve(ctx context.Context, node *tsnet.Server, o ServeOptions) error {
	lc, err := node.LocalClient()
	if err != nil {
		return fmt.Errorf("API server proxy: local client: %w", err)
	}
	h, err := NewHandler(Options{Upstream: o.Upstream, Mode: o.Mode, WhoIs: lc.WhoIs, Logger: o.Logger})
	if err != nil {
		return fmt.Errorf("API server proxy: %w", err)
	}
	getCert := o.GetCertificate
	if getCert == nil {
		getCert = lc.GetCertificate
	}
	ln, err := node.Listen("tcp", ":443")
	if err != nil {
		return fmt.Errorf("API server proxy: listen on the tailnet port 443: %w", err)
	}
	srv := NewServer(h, o.Logger)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(tls.NewListener(ln, TLSConfig(getCert))); err != nil && !errors.Is(err, http.ErrServerClosed) {
			o.Logger.Error("API server proxy stopped", "err", err)
		}
	}()
	o.Logger.Info("API server proxy listening on the tailnet", "port", 443, "mode", o.Mode)
	select {
	case <-ctx.Done():
	case <-done:
		return nil
	}
	sctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		srv.Close()
	}
	<-done
	return nil
}

// NewServer is an http.Server for the handler: no write timeout (watches
// and exec sessions last), HTTP/1.1 only, TLS handshake noise at debug.
func NewServer(h http.Handler, logger *log.Logger) *http.Server {
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       120 * time.Second,
		Protocols:         new(http.Protocols),
	}
	srv.Protocols.SetHTTP1(true)
	if logger != nil {
		srv.ErrorLog = logger.StandardLog(log.StandardLogOptions{ForceLevel: log.DebugLevel})
	}
	return srv
}
