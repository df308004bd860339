package proxy

import (
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"tailscale.com/tailcfg"

	"github.com/tailplane/tailplane/internal/tailnettest"
	"github.com/tailplane/tailplane/internal/testpoll"
	"github.com/tailplane/tailplane/proxy/config"
)

// The public stand-in for Funnel follows the tailnet as Funnel does: when
// control gives the node no funnel attribute (the policy's nodeAttrs), the
// config is refused with tailscale's words and nothing listens publicly.
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
	startEngine(t, tn, cfg, Options{PublicAddr: pubAddr, Status: status})
	testpoll.Until(t, 60*time.Second, "config refused for Funnel", func() error {
		if _, msg := status.get(); !strings.Contains(msg, `"funnel" node attribute not set`) {
			return fmt.Errorf("config_error %q", msg)
		}
		return nil
	})
	if c, err := net.DialTimeout("tcp", pubAddr, time.Second); err == nil {
		c.Close()
		t.Fatal("the public address listens without the funnel attribute")
	}
}
