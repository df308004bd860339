package proxy

import (
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/log"
	dto "github.com/prometheus/client_model/go"

	"github.com/tailplane/tailplane/internal/syncbuf"
	"github.com/tailplane/tailplane/internal/tailnettest"
	"github.com/tailplane/tailplane/internal/testpoll"
	"github.com/tailplane/tailplane/proxy/config"
)

// A proxy logs its tailnet IPs once when it runs, and "config applied"
// once per config: the operator's next render, the same config without the
// spent auth key, is applied without a second line.
func TestLogsRunningOnceAndConfigAppliedOncePerConfig(t *testing.T) {
	tn := tailnettest.New(t, tailnettest.WithAuthKey("tskey-logs-once"))
	var logs syncbuf.Buffer
	logger := log.NewWithOptions(io.MultiWriter(&logs, testWriter{t}), log.Options{Level: log.InfoLevel})
	cfg := newConfig(tn, "logs-once", config.RoleConnector)
	cfg.Connector = &config.Connector{Routes: []string{"10.99.0.0/24"}}
	r := start(t, tn, cfg, Options{Logger: logger})
	applied := r.engine.metrics.ConfigReloads.WithLabelValues("applied")

	cfg.AuthKey = ""
	writeConfig(t, r.cfgPath, cfg)
	testpoll.Until(t, 20*time.Second, "the config without the auth key applied", func() error {
		var m dto.Metric
		if err := applied.Write(&m); err != nil {
			return err
		}
		if n := m.GetCounter().GetValue(); n != 2 {
			return fmt.Errorf("%v configs applied", n)
		}
		return nil
	})
	ip4, ip6 := r.engine.Node().TailscaleIPs()
	out := logs.String()
	if n := strings.Count(out, "config applied"); n != 1 {
		t.Errorf("%q logged %d times, want once:\n%s", "config applied", n, out)
	}
	if n := strings.Count(out, "running on the tailnet"); n != 1 || !strings.Contains(out, ip4.String()) || !strings.Contains(out, ip6.String()) {
		t.Errorf("%q logged %d times, want once with %s and %s:\n%s", "running on the tailnet", n, ip4, ip6, out)
	}
}
