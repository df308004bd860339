package proxy

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/tailplane/tailplane/internal/tailnettest"
	"github.com/tailplane/tailplane/internal/testpoll"
	"github.com/tailplane/tailplane/proxy/config"
)

// TLS mode none (an Ingress without a certificate on a control server that
// issues none): the routes are served as plain HTTP on port 80, and nothing
// listens on 443, so no client waits on a TLS handshake that cannot succeed.
func TestL7PlainHTTPWithoutTLS(t *testing.T) {
	tn := tailnettest.New(t)
	web := echoBackend(t, "web")
	cfg := newConfig(tn, "plain-proxy", config.RoleIngressL7)
	b := backendOf("web", web)
	cfg.L7 = &config.L7{TLS: config.TLS{Mode: config.TLSNone}, PlainHTTP: true, DefaultBackend: &b}
	r := start(t, tn, cfg, Options{})
	plain := r.plainClient()
	testpoll.Until(t, 20*time.Second, "plain HTTP on :80", func() error {
		resp, _, err := get(plain, "http://app.example.com/x", nil)
		if err != nil || resp.StatusCode != http.StatusOK || resp.Header.Get("X-Backend") != "web" {
			return fmt.Errorf("%v %v", err, resp)
		}
		return nil
	})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if c, err := r.client.Dial(ctx, "tcp", r.proxyAddr(443)); err == nil {
		c.Close()
		t.Fatal("port 443 accepts connections with TLS mode none")
	}
}
