package proxy

import (
	"context"
	"errors"
	"net"
	"net/http"
	"time"

	"github.com/charmbracelet/log"

	"github.com/tailplane/tailplane/proxy/l7"
)

// serveHTTP runs an http.Server on ln. TLS (with h2) is terminated by ln.
func (e *Engine) serveHTTP(ln net.Listener, h http.Handler) *listenerHandle {
	return e.serveHTTPProtocols(ln, h, false)
}

// serveHTTPProtocols is serveHTTP that also accepts HTTP/2 without TLS
// (prior knowledge) when h2c is set: gRPC clients on a gateway's HTTP
// listeners.
func (e *Engine) serveHTTPProtocols(ln net.Listener, h http.Handler, h2c bool) *listenerHandle {
	srv := &http.Server{
		Handler:           h,
		ConnContext:       l7.ConnContext,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       120 * time.Second,
		// TLS handshake failures and client resets are routine; keep them at debug.
		ErrorLog:  e.log.StandardLog(log.StandardLogOptions{ForceLevel: log.DebugLevel}),
		Protocols: new(http.Protocols),
	}
	srv.Protocols.SetHTTP1(true)
	srv.Protocols.SetHTTP2(true)
	srv.Protocols.SetUnencryptedHTTP2(h2c)
	gauge := e.metrics.ActiveConnections.WithLabelValues("l7")
	srv.ConnState = func(_ net.Conn, s http.ConnState) {
		switch s {
		case http.StateNew:
			gauge.Inc()
		case http.StateClosed, http.StateHijacked:
			gauge.Dec()
		}
	}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			e.log.Warn("http listener stopped", "addr", ln.Addr(), "err", err)
		}
	}()
	return &listenerHandle{shutdown: func(ctx context.Context) {
		if err := srv.Shutdown(ctx); err != nil {
			e.log.Warn("http drain incomplete", "addr", ln.Addr(), "err", err)
			srv.Close()
		}
	}, kill: func() { srv.Close() }}
}
