package proxy

import (
	"context"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/tailplane/tailplane/internal/kubestate"
	"github.com/tailplane/tailplane/internal/proxystate"
	"github.com/tailplane/tailplane/internal/tailnettest"
	"github.com/tailplane/tailplane/internal/testpoll"
	"github.com/tailplane/tailplane/proxy/config"
)

// statusRecorder keeps what the engine reports (StatusWriter).
type statusRecorder struct {
	mu       sync.Mutex
	device   kubestate.DeviceInfo
	cfgError string
	serving  bool // SetConfigServing was called
	services map[string]proxystate.ServiceReport
}

func (s *statusRecorder) SetServices(_ context.Context, r map[string]proxystate.ServiceReport) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.services = r
	return nil
}

func (s *statusRecorder) getServices() map[string]proxystate.ServiceReport {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.services
}

func (s *statusRecorder) SetDeviceInfo(_ context.Context, d kubestate.DeviceInfo) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.device = d
	return nil
}

func (s *statusRecorder) SetConfigError(_ context.Context, msg string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cfgError = msg
	return nil
}

func (s *statusRecorder) SetConfigServing(_ context.Context, problem string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cfgError, s.serving = problem, true
	return nil
}

// servingState returns whether a config was applied, and config_error.
func (s *statusRecorder) servingState() (bool, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.serving, s.cfgError
}

func (s *statusRecorder) get() (kubestate.DeviceInfo, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.device, s.cfgError
}

// A new hostname in the config renames the running device within seconds:
// same device, no restart, the new MagicDNS name is reported as
// device_fqdn and serves, the old name is gone from the tailnet, and no
// config error is recorded.
func TestHostnameChangeRenamesTheDeviceLive(t *testing.T) {
	tn := tailnettest.New(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tcpHalfCloseServer(t, ln)
	cfg := newConfig(tn, "before", config.RoleIngressL4)
	cfg.L4 = &config.L4{Ports: []config.PortMap{{Protocol: config.TCP, Port: 5432, Target: ln.Addr().String()}}}
	rec := &statusRecorder{}
	r := start(t, tn, cfg, Options{Status: rec})
	testpoll.Until(t, 20*time.Second, "device_fqdn before", func() error {
		if d, _ := rec.get(); d.FQDN != tailnettest.FQDN("before")+"." {
			return fmt.Errorf("device_fqdn %q", d.FQDN)
		}
		return nil
	})
	before, _ := rec.get()
	roundTrip := func(host string) error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return pingEcho(ctx, r.client, net.JoinHostPort(host, "5432"))
	}
	testpoll.Until(t, 20*time.Second, "served as before", func() error { return roundTrip(tailnettest.FQDN("before")) })

	renamedAt := time.Now()
	cfg.Hostname = "after"
	writeConfig(t, r.cfgPath, cfg)
	testpoll.Until(t, 10*time.Second, "device_fqdn after", func() error {
		d, cfgErr := rec.get()
		if cfgErr != "" {
			return fmt.Errorf("config refused: %s", cfgErr)
		}
		if d.FQDN != tailnettest.FQDN("after")+"." {
			return fmt.Errorf("device_fqdn %q", d.FQDN)
		}
		return nil
	})
	testpoll.Until(t, 10*time.Second, "served as after", func() error { return roundTrip(tailnettest.FQDN("after")) })
	t.Logf("renamed and serving in %s", time.Since(renamedAt).Round(time.Millisecond))
	if d, _ := rec.get(); d.ID != before.ID {
		t.Fatalf("device %s replaced by %s; a rename keeps the device", before.ID, d.ID)
	}
	lc, err := r.client.LocalClient()
	if err != nil {
		t.Fatal(err)
	}
	testpoll.Until(t, 10*time.Second, "old name gone from the tailnet", func() error {
		st, err := lc.Status(context.Background())
		if err != nil {
			return err
		}
		for _, p := range st.Peer {
			if p.DNSName == tailnettest.FQDN("before")+"." {
				return fmt.Errorf("peer %s still named %s", p.ID, p.DNSName)
			}
		}
		return nil
	})
	if !r.engine.Ready() {
		t.Fatal("engine not ready after the rename")
	}
}
