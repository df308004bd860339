package main

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/charmbracelet/log"
	"k8s.io/client-go/rest"
	"tailscale.com/tsnet"

	"github.com/tailplane/tailplane/proxy/apiserver"
)

// The operator's own API server proxy, as the official operator's: the
// Kubernetes API on port 443 of the operator's tailnet device, with its
// MagicDNS certificate, while the device runs (on the leader).
const (
	envAPIServerProxy = "APISERVER_PROXY" // true (mode auth), noauth, false or empty (off)
	envAuthProxy      = "AUTH_PROXY"      // deprecated boolean: true is APISERVER_PROXY=true
	// apiProxyStopTimeout bounds the wait for open requests when the
	// device stops; watches are cut after it.
	apiProxyStopTimeout = 5 * time.Second
)

// apiServerProxyMode reads APISERVER_PROXY and the deprecated AUTH_PROXY
// as the official operator does; "" means no proxy. Where the official
// operator panics or exits on a bad value, this is an error naming it.
func apiServerProxyMode(getenv func(string) string) (apiserver.Mode, error) {
	api, auth := getenv(envAPIServerProxy), getenv(envAuthProxy)
	switch {
	case api != "" && auth != "":
		return "", fmt.Errorf("%s (deprecated) and %s are mutually exclusive; unset %s", envAuthProxy, envAPIServerProxy, envAuthProxy)
	case auth != "":
		on, err := strconv.ParseBool(auth)
		if err != nil {
			return "", fmt.Errorf("%s: %q is not a boolean", envAuthProxy, auth)
		}
		if on {
			return apiserver.ModeAuth, nil
		}
		return "", nil
	}
	switch api {
	case "", "false":
		return "", nil
	case "true":
		return apiserver.ModeAuth, nil
	case "noauth":
		return apiserver.ModeNoAuth, nil
	}
	return "", fmt.Errorf("%s: %q is not one of true (auth mode), noauth or false", envAPIServerProxy, api)
}

// apiProxy runs the API server proxy on the device for one term of
// leadership at a time.
type apiProxy struct {
	upstream *rest.Config // the operator's own credentials
	mode     apiserver.Mode
	log      *log.Logger
	running  *apiserver.Running
}

// start serves on the device's port 443 (the node has just come up).
func (p *apiProxy) start(node *tsnet.Server) error {
	r, err := apiserver.Start(node, apiserver.ServeOptions{Upstream: p.upstream, Mode: p.mode, Logger: p.log.With("component", "apiserver-proxy")})
	if err != nil {
		return err
	}
	p.running = r
	return nil
}

// stop ends it before the device closes.
func (p *apiProxy) stop(ctx context.Context) {
	if p.running == nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, apiProxyStopTimeout)
	defer cancel()
	p.running.Stop(ctx)
	p.running = nil
}
