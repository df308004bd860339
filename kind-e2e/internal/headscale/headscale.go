// Package headscale runs a Headscale control server (the binary that go
// tool task test:headscale builds from kind-e2e/tools/headscale) on
// loopback for devcluster: its config, DERP map and policy file in a folder
// of its own, an API key for the operator, and the few REST calls devcluster
// makes itself (an ephemeral key for `devcluster curl`). The policy file is
// Tailscale's: TranslatePolicy rewrites what Headscale v0.27.1 cannot read
// (grants as ACL rules) and drops, with a logged note, what it cannot do
// (Funnel, node attributes, Tailscale Services).
//
// DERP is devcluster's own relay (a DERP map file Headscale serves as is):
// Headscale's embedded DERP server would be named by the server URL and
// dialled over TLS, which a plain-HTTP server on loopback cannot answer.
//
// It imports the standard library, charmbracelet/log, tailscale.com's
// tailcfg (the DERP map), github.com/tailscale/hujson (policy files) and
// internal/freeport.
package headscale

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/charmbracelet/log"
	"tailscale.com/tailcfg"

	"github.com/tailplane/tailplane/kind-e2e/internal/freeport"
)

// Config says how to run Headscale.
type Config struct {
	// Binary is the headscale executable.
	Binary string
	// Dir holds its config, database, keys, socket and log.
	Dir string
	// Host is the IPv4 address it listens on (127.0.0.1).
	Host string
	// BaseDomain is the MagicDNS suffix of its nodes.
	BaseDomain string
	// Policy is the policy file's text (HuJSON, Tailscale's format);
	// empty allows everything. It is translated for Headscale v0.27.1
	// (TranslatePolicy), which has no grants, nodeAttrs or services.
	Policy string
	// Groups is the user directory (devcluster up --group): groups the
	// policy may use without defining them. Their members are created as
	// Headscale users, so that keys can be minted for them.
	Groups map[string][]string
	// DERPMap is the relay its nodes use.
	DERPMap *tailcfg.DERPMap
	// Logger reports its start and exit.
	Logger *log.Logger
}

// Server is a running Headscale.
type Server struct {
	// URL is its server_url: where nodes log in and its REST API.
	URL string
	// APIKey is an API key for the REST API (Bearer).
	APIKey string
	// ConfigFile is its config, for the headscale CLI (-c).
	ConfigFile string

	cfg    Config
	cmd    *exec.Cmd
	exited chan struct{}
	logf   *os.File
}

// Start writes the config, starts `headscale serve`, waits until it
// answers /health, and creates an API key. The process logs to
// Dir/headscale.log.
func Start(ctx context.Context, cfg Config) (*Server, error) {
	if err := os.MkdirAll(cfg.Dir, 0o700); err != nil {
		return nil, err
	}
	ports, err := freeport.On(cfg.Host, 3)
	if err != nil {
		return nil, err
	}
	s := &Server{URL: "http://" + net.JoinHostPort(cfg.Host, strconv.Itoa(ports[0])), ConfigFile: filepath.Join(cfg.Dir, "config.yaml"), cfg: cfg, exited: make(chan struct{})}
	if err := s.writeFiles(ports); err != nil {
		return nil, err
	}
	if s.logf, err = os.OpenFile(filepath.Join(cfg.Dir, "headscale.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644); err != nil {
		return nil, err
	}
	s.cmd = exec.Command(cfg.Binary, "serve", "-c", s.ConfigFile)
	s.cmd.Stdout, s.cmd.Stderr = s.logf, s.logf
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	if err := s.cmd.Start(); err != nil {
		s.logf.Close()
		return nil, fmt.Errorf("start headscale (%s; go tool task test:headscale builds it): %w", cfg.Binary, err)
	}
	go func() { _ = s.cmd.Wait(); close(s.exited) }()
	if err := s.waitHealthy(ctx); err != nil {
		s.Close()
		return nil, err
	}
	out, err := s.CLI(ctx, "apikeys", "create", "--expiration", "8760h")
	if err != nil {
		s.Close()
		return nil, fmt.Errorf("create a Headscale API key: %w", err)
	}
	s.APIKey = strings.TrimSpace(out)
	c := &client{base: s.URL, key: s.APIKey}
	for _, group := range slices.Sorted(maps.Keys(cfg.Groups)) {
		for _, member := range cfg.Groups[group] {
			if _, err := c.userID(ctx, member); err != nil {
				s.Close()
				return nil, fmt.Errorf("create Headscale user %s of %s: %w", member, group, err)
			}
		}
	}
	cfg.Logger.Info("headscale ready", "url", s.URL, "log", s.logf.Name())
	return s, nil
}

// translate translates policy for Headscale and logs what it changed.
func (s *Server) translate(policy string) (string, error) {
	p, err := TranslatePolicy(policy, s.cfg.Groups)
	if err != nil {
		return "", err
	}
	for _, n := range p.Notes {
		s.cfg.Logger.Warn("policy translated for Headscale: " + n)
	}
	if p.JSON == "" {
		return allowAll, nil
	}
	return p.JSON, nil
}

// CLI runs the headscale CLI against the server (through its unix socket)
// and returns its standard output.
func (s *Server) CLI(ctx context.Context, args ...string) (string, error) {
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, s.cfg.Binary, append([]string{"-c", s.ConfigFile}, args...)...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("headscale %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

// SetPolicy replaces the policy file and has Headscale reload it (SIGHUP),
// as devcluster's --policy watch does for its own control server.
func (s *Server) SetPolicy(policy string) error {
	translated, err := s.translate(policy)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(s.cfg.Dir, "policy.hujson"), []byte(translated), 0o600); err != nil {
		return err
	}
	return s.cmd.Process.Signal(syscall.SIGHUP)
}

// Done is closed when the process exited.
func (s *Server) Done() <-chan struct{} { return s.exited }

// Close stops the process (SIGTERM, then SIGKILL after 10 s).
func (s *Server) Close() {
	if s.cmd.Process != nil {
		_ = s.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-s.exited:
		case <-time.After(10 * time.Second):
			_ = s.cmd.Process.Kill()
			<-s.exited
		}
	}
	s.logf.Close()
}

func (s *Server) waitHealthy(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	var last error
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.URL+"/health", nil)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("/health: %s", resp.Status)
		}
		last = err
		select {
		case <-s.exited:
			return fmt.Errorf("headscale exited at start; see %s", s.logf.Name())
		case <-ctx.Done():
			return fmt.Errorf("headscale not healthy in time (%v); see %s", last, s.logf.Name())
		case <-tick.C:
		}
	}
}

// allowAll is the policy of a new tailnet: everyone reaches everything.
const allowAll = `{"acls": [{"action": "accept", "src": ["*"], "dst": ["*:*"]}]}`

// writeFiles writes config.yaml (ports: HTTP, gRPC, metrics), derp.yaml and
// policy.hujson.
func (s *Server) writeFiles(ports []int) error {
	d := s.cfg.Dir
	policy, err := s.translate(s.cfg.Policy)
	if err != nil {
		return err
	}
	config := fmt.Sprintf(`# Written by devcluster for Headscale v0.27.1.
server_url: %[1]s
listen_addr: %[2]s
grpc_listen_addr: %[3]s
metrics_listen_addr: %[4]s
grpc_allow_insecure: false
noise:
  private_key_path: %[5]s/noise_private.key
prefixes:
  v4: 100.64.0.0/10
  v6: fd7a:115c:a1e0::/48
  allocation: sequential
derp:
  server:
    enabled: false
  urls: []
  paths: [%[5]s/derp.yaml]
  auto_update_enabled: false
disable_check_updates: true
ephemeral_node_inactivity_timeout: 2m
database:
  type: sqlite
  sqlite:
    path: %[5]s/db.sqlite
    write_ahead_log: true
log:
  level: info
  format: text
policy:
  mode: file
  path: %[5]s/policy.hujson
dns:
  magic_dns: true
  base_domain: %[6]s
  override_local_dns: false
  nameservers:
    global: []
unix_socket: %[5]s/headscale.sock
unix_socket_permission: "0770"
logtail:
  enabled: false
randomize_client_port: false
`, s.URL, net.JoinHostPort(s.cfg.Host, strconv.Itoa(ports[0])), net.JoinHostPort(s.cfg.Host, strconv.Itoa(ports[1])), net.JoinHostPort(s.cfg.Host, strconv.Itoa(ports[2])), d, s.cfg.BaseDomain)
	files := map[string]string{"config.yaml": config, "derp.yaml": derpYAML(s.cfg.DERPMap), "policy.hujson": policy}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(d, name), []byte(body), 0o600); err != nil {
			return err
		}
	}
	return nil
}

// derpYAML renders a DERP map as Headscale reads it (yaml.v3 into
// tailcfg.DERPMap: lower-cased field names).
func derpYAML(m *tailcfg.DERPMap) string {
	var b strings.Builder
	b.WriteString("regions:\n")
	for id, r := range m.Regions {
		fmt.Fprintf(&b, "  %d:\n    regionid: %d\n    regioncode: %s\n    regionname: %s\n    nodes:\n", id, r.RegionID, r.RegionCode, r.RegionName)
		for _, n := range r.Nodes {
			fmt.Fprintf(&b, "      - name: %q\n        regionid: %d\n        hostname: %s\n        ipv4: %s\n        ipv6: %q\n"+
				"        stunport: %d\n        derpport: %d\n        stuntestip: %s\n        insecurefortests: %t\n",
				n.Name, n.RegionID, n.HostName, n.IPv4, n.IPv6, n.STUNPort, n.DERPPort, n.STUNTestIP, n.InsecureForTests)
		}
	}
	return b.String()
}
