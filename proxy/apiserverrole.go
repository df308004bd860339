package proxy

import (
	"crypto/tls"
	"fmt"
	"net"
	"net/http"

	"k8s.io/client-go/rest"

	"github.com/tailplane/tailplane/proxy/apiserver"
	"github.com/tailplane/tailplane/proxy/config"
)

// The kube-apiserver role is the ingress-group machinery with one service:
// the replica hosts the Tailscale Service on 443 with the shared
// certificate (advertising, issuing, reporting as an ingress-group
// replica does), and the service's handler is the API server proxy
// instead of L7 routes.

// isGroupRole says whether the role hosts Tailscale Services.
func isGroupRole(r config.Role) bool {
	return r == config.RoleIngressGroup || r == config.RoleKubeAPIServer
}

// groupServices are the Tailscale Services cfg hosts. The kube-apiserver
// service is an L7 service with the section's TLS and no routes: its
// certificate and ports are handled like any L7 service's.
func groupServices(cfg *config.Config) []config.Service {
	switch {
	case cfg.Group != nil:
		return cfg.Group.Services
	case cfg.APIServer != nil:
		return []config.Service{{Name: cfg.APIServer.ServiceName, L7: &config.L7{TLS: cfg.APIServer.TLS}}}
	}
	return nil
}

// apiServerHandler returns the API server proxy for mode, built once per
// mode (Run goroutine only).
func (e *Engine) apiServerHandler(mode config.APIServerMode) (http.Handler, error) {
	if h, ok := e.apiHandlers[mode]; ok {
		return h, nil
	}
	upstream := e.opts.APIServerUpstream
	if upstream == nil {
		var err error
		if upstream, err = rest.InClusterConfig(); err != nil {
			return nil, fmt.Errorf("apiServer: the cluster's API server: %w", err)
		}
	}
	lc, err := e.node.LocalClient()
	if err != nil {
		return nil, fmt.Errorf("apiServer: %w", err)
	}
	h, err := apiserver.NewHandler(apiserver.Options{Upstream: upstream, Mode: apiserver.Mode(mode), WhoIs: lc.WhoIs, Logger: e.log.With("apiServer", mode)})
	if err != nil {
		return nil, fmt.Errorf("apiServer: %w", err)
	}
	if e.apiHandlers == nil {
		e.apiHandlers = map[config.APIServerMode]http.Handler{}
	}
	e.apiHandlers[mode] = h
	return h, nil
}

// apiServerSpec serves the API server proxy on the service's port 443,
// HTTP/1.1 only (SPDY upgrades do not exist in HTTP/2); a mode change
// swaps the handler under the open listener.
func (e *Engine) apiServerSpec(prefix string, gs *groupService) listenerSpec {
	tlsCfg := apiserver.TLSConfig(e.serviceTLS(gs).GetCertificate)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if p := gs.api.Load(); p != nil {
			(*p).ServeHTTP(w, r)
			return
		}
		http.Error(w, "the API server proxy is not configured", http.StatusServiceUnavailable)
	})
	return e.vipSpec(prefix, gs.name, 443, "", func(ln net.Listener) *listenerHandle {
		return e.serveHTTP(tls.NewListener(ln, tlsCfg), h)
	})
}
