package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sort"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func metav1ObjectMeta(ns, name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Namespace: ns, Name: name}
}

// servers are the HTTP listeners for health and metrics.
type servers struct{ list []*http.Server }

func (s *servers) shutdown() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, srv := range s.list {
		_ = srv.Shutdown(ctx)
	}
}

// Handler returns the HTTP handler serving /healthz, /readyz and /metrics,
// for embedding in a server of one's own.
func (o *Operator) Handler() http.Handler {
	mux := http.NewServeMux()
	o.route(mux, true, true)
	return mux
}

func (o *Operator) route(mux *http.ServeMux, health, metrics bool) {
	if health {
		mux.HandleFunc("/healthz", o.healthz)
		mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
			if !o.Ready() {
				http.Error(w, "informers not synced", http.StatusServiceUnavailable)
				return
			}
			fmt.Fprintln(w, "ok")
		})
	}
	if metrics {
		mux.Handle("/metrics", promhttp.HandlerFor(o.metrics.registry, promhttp.HandlerOpts{}))
	}
}

// healthz runs the probes and reports their values as JSON; any probe error
// fails it with 500.
func (o *Operator) healthz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
	defer cancel()
	o.mu.Lock()
	ids := make([]string, 0, len(o.probes))
	for id := range o.probes {
		ids = append(ids, id)
	}
	probes := o.probes
	o.mu.Unlock()
	sort.Strings(ids)
	out := map[string]any{}
	status := http.StatusOK
	for _, id := range ids {
		v, err := probes[id](ctx)
		if err != nil {
			status = http.StatusInternalServerError
			v = map[string]string{"error": err.Error()}
		}
		out[id] = v
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(out)
}

// serve starts the listeners named by HealthAddress and MetricsAddress.
func (o *Operator) serve(ctx context.Context) (*servers, error) {
	s := &servers{}
	h, m := o.settings.HealthAddress, o.settings.MetricsAddress
	type listen struct {
		addr            string
		health, metrics bool
	}
	var ls []listen
	switch {
	case h == m && h != "-":
		ls = append(ls, listen{h, true, true})
	default:
		if h != "-" {
			ls = append(ls, listen{h, true, false})
		}
		if m != "-" {
			ls = append(ls, listen{m, false, true})
		}
	}
	for _, l := range ls {
		lis, err := (&net.ListenConfig{}).Listen(ctx, "tcp", l.addr)
		if err != nil {
			s.shutdown()
			return nil, fmt.Errorf("runtime: listen on %s: %w", l.addr, err)
		}
		mux := http.NewServeMux()
		o.route(mux, l.health, l.metrics)
		srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
		s.list = append(s.list, srv)
		go func() {
			if err := srv.Serve(lis); err != nil && !errors.Is(err, http.ErrServerClosed) {
				o.log.Error("http server stopped", "addr", l.addr, "err", err)
			}
		}()
		o.log.Info("serving", "addr", lis.Addr().String(), "health", l.health, "metrics", l.metrics)
	}
	return s, nil
}
