package proxy

import (
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"tailscale.com/tailcfg"

	"github.com/tailplane/tailplane/internal/tailnettest"
	"github.com/tailplane/tailplane/internal/testpoll"
	"github.com/tailplane/tailplane/proxy/config"
)

// The public stand-in for Funnel follows the tailnet as Funnel does: when
// control gives the node no funnel attribute (the policy's nodeAttrs),
// nothing listens publicly and config_error says why with tailscale's
// words. The Funnel listener failing does not take the rest down: the
// config applies (config_applied) and the tailnet side serves HTTPS.
func TestPublicListenerNeedsFunnelAttribute(t *testing.T) {
	tn := tailnettest.New(t)
	tn.Control.DefaultNodeCapabilities = &tailcfg.NodeCapMap{tailcfg.CapabilityHTTPS: nil}
	cert := newTestCert(t, "pub.example.com")
	b := backendOf("pub", echoBackend(t, "pub"))
	cfg := newConfig(tn, "nofunnel", config.RoleIngressL7)
	cfg.L7 = &config.L7{TLS: cert.files(t), Funnel: true, DefaultBackend: &b}
	pub, _ := net.Listen("tcp", "127.0.0.1:0")
	pubAddr := pub.Addr().String()
	pub.Close()
	status := &statusRecorder{}
	r := start(t, tn, cfg, Options{PublicAddr: pubAddr, Status: status})
	testpoll.Until(t, 60*time.Second, "config applied without Funnel", func() error {
		if serving, msg := status.servingState(); !serving || !strings.Contains(msg, `"funnel" node attribute not set`) {
			return fmt.Errorf("serving %v, config_error %q", serving, msg)
		}
		return nil
	})
	testpoll.Until(t, 30*time.Second, "HTTPS on the tailnet", func() error {
		resp, _, err := get(r.httpsClient(cert.roots), "https://pub.example.com/", nil)
		if err != nil || resp.StatusCode != http.StatusOK || resp.Header.Get("X-Backend") != "pub" {
			return fmt.Errorf("%v %v", err, resp)
		}
		return nil
	})
	if c, err := net.DialTimeout("tcp", pubAddr, time.Second); err == nil {
		c.Close()
		t.Fatal("the public address listens without the funnel attribute")
	}
}
