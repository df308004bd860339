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
// tailnet device) until ctx ends. It returns at once with an error when it
// cannot start.
func Serve(ctx context.Context, node *tsnet.Server, o ServeOptions) error {
	r, err := Start(node, o)
	if err != nil {
		return err
	}
	select {
	case <-ctx.Done():
	case <-r.done:
	}
	sctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	r.Stop(sctx)
	return nil
}

// Running is a proxy Start started.
type Running struct {
	srv  *http.Server
	done chan struct{}
}

// Start opens port 443 on node and serves the API server proxy there until
// Stop.
func Start(node *tsnet.Server, o ServeOptions) (*Running, error) {
	if o.Logger == nil {
		o.Logger = log.New(discard{})
	}
	lc, err := node.LocalClient()
	if err != nil {
		return nil, fmt.Errorf("API server proxy: local client: %w", err)
	}
	h, err := NewHandler(Options{Upstream: o.Upstream, Mode: o.Mode, WhoIs: lc.WhoIs, Logger: o.Logger})
	if err != nil {
		return nil, fmt.Errorf("API server proxy: %w", err)
	}
	getCert := o.GetCertificate
	if getCert == nil {
		getCert = lc.GetCertificate
	}
	ln, err := node.Listen("tcp", ":443")
	if err != nil {
		return nil, fmt.Errorf("API server proxy: listen on the tailnet port 443: %w", err)
	}
	r := &Running{srv: NewServer(h, o.Logger), done: make(chan struct{})}
	go func() {
		defer close(r.done)
		if err := r.srv.Serve(tls.NewListener(ln, TLSConfig(getCert))); err != nil && !errors.Is(err, http.ErrServerClosed) {
			o.Logger.Error("API server proxy stopped", "err", err)
		}
	}()
	o.Logger.Info("API server proxy listening on the tailnet", "port", 443, "mode", o.Mode)
	return r, nil
}

// Stop closes the listener, lets open requests finish until ctx ends, then
// cuts the rest (watches, exec sessions).
func (r *Running) Stop(ctx context.Context) {
	if err := r.srv.Shutdown(ctx); err != nil {
		r.srv.Close()
	}
	<-r.done
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
