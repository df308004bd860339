package proxy

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/charmbracelet/log"
)

// startLocal serves /healthz and /metrics on Options.LocalAddr (if set).
func (e *Engine) startLocal() (*http.Server, error) {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		switch {
		case !e.loggedIn.Load():
			http.Error(w, "not logged in to the tailnet", http.StatusServiceUnavailable)
		case !e.active.Load():
			http.Error(w, "no active config", http.StatusServiceUnavailable)
		case e.priming.Load():
			http.Error(w, "pinging the recent peers of the previous process", http.StatusServiceUnavailable)
		case e.hostWait.Load():
			http.Error(w, "waiting for control to route this replica's Tailscale Services to it", http.StatusServiceUnavailable)
		default:
			fmt.Fprintln(w, "ok")
		}
	})
	mux.Handle("/metrics", e.metrics.Handler())
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second,
		ErrorLog: e.log.StandardLog(log.StandardLogOptions{ForceLevel: log.DebugLevel})}
	if e.opts.LocalAddr == "" {
		return srv, nil
	}
	ln, err := net.Listen("tcp", e.opts.LocalAddr)
	if err != nil {
		return nil, fmt.Errorf("health and metrics listener on %s: %w", e.opts.LocalAddr, err)
	}
	e.localAddr.Store(ln.Addr().String())
	e.log.Info("health and metrics", "addr", ln.Addr().String())
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			e.log.Error("health and metrics listener stopped", "err", err)
		}
	}()
	return srv, nil
}

// LocalAddr returns the address /healthz and /metrics are served on, once
// Run has started ("" when Options.LocalAddr is empty).
func (e *Engine) LocalAddr() string {
	v, _ := e.localAddr.Load().(string)
	return v
}
