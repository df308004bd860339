package gatewayconformance

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/url"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/websocket"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	cgrpc "sigs.k8s.io/gateway-api/conformance/utils/grpc"
	tsapi "tailscale.com/client/tailscale/v2"
	"tailscale.com/ipn/store/mem"
	"tailscale.com/net/netns"
	"tailscale.com/tsnet"
)

// joinTailnet joins devcluster's tailnet with an ephemeral tsnet node, as
// the operator suite's clients do: an auth key minted through the tailnet's
// API with devcluster's OAuth client. The Gateways' addresses are tailnet
// addresses, which only a tailnet node reaches.
func joinTailnet(ctx context.Context, t *testing.T, c *cluster) *tsnet.Server {
	t.Helper()
	env, err := c.env()
	if err != nil {
		t.Fatal(err)
	}
	base, err := url.Parse(env["TS_API_URL"])
	if err != nil {
		t.Fatalf("TS_API_URL: %v", err)
	}
	api := &tsapi.Client{BaseURL: base, Tailnet: "-", Auth: &tsapi.OAuth{ClientID: env["TS_API_CLIENT_ID"], ClientSecret: env["TS_API_CLIENT_SECRET"]}}
	var req tsapi.CreateKeyRequest
	req.Description, req.ExpirySeconds = "gateway conformance client", 3600
	req.Capabilities.Devices.Create.Ephemeral = true
	req.Capabilities.Devices.Create.Preauthorized = true
	key, err := api.Keys().CreateAuthKey(ctx, req)
	if err != nil {
		t.Fatalf("mint an auth key: %v", err)
	}
	// devcluster's tailnet is on this host's addresses: no socket marks.
	netns.SetEnabled(false)
	node := &tsnet.Server{
		ControlURL: env["TS_CONTROL_URL"], Hostname: "gateway-conformance", AuthKey: key.Key, Ephemeral: true,
		Store: new(mem.Store), Dir: t.TempDir(), Logf: func(string, ...any) {}, UserLogf: t.Logf,
	}
	upCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if _, err := node.Up(upCtx); err != nil {
		t.Fatalf("join devcluster's tailnet: %v", err)
	}
	t.Cleanup(func() { _ = node.Close() })
	return node
}

// dialFunc dials network addresses, as net.Dialer.DialContext.
type dialFunc func(ctx context.Context, network, addr string) (net.Conn, error)

// tailnetGRPC is the suite's gRPC client (utils/grpc.DefaultClient, whose
// requests, metadata and comparisons it keeps) with connections dialled
// through the tailnet: DefaultClient dials with the host's network, and
// reuses its connection whatever the address, which this client re-dials
// when the address or authority changes.
type tailnetGRPC struct {
	dial dialFunc
	// mu guards inner and target: the suite's parallel tests may share
	// the client.
	mu     sync.Mutex
	inner  cgrpc.DefaultClient
	target string
}

// SendRPC sends one RPC of expected to address through the tailnet.
func (c *tailnetGRPC) SendRPC(t *testing.T, address string, expected cgrpc.ExpectedResponse, timeout time.Duration) (*cgrpc.Response, error) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	authority := ""
	if expected.RequestMetadata != nil {
		authority = expected.RequestMetadata.Authority
	}
	if target := address + " " + authority; c.inner.Conn == nil || c.target != target {
		c.inner.Close()
		opts := []grpc.DialOption{
			grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) { return c.dial(ctx, "tcp", addr) }),
		}
		if authority != "" {
			opts = append(opts, grpc.WithAuthority(authority))
		}
		// passthrough: the address (a tailnet IP or MagicDNS name) goes
		// to the tailnet dialer as it is, not to the host's resolver.
		conn, err := grpc.NewClient("passthrough:///"+address, opts...)
		if err != nil {
			return &cgrpc.Response{}, fmt.Errorf("gRPC client for %s: %w", address, err)
		}
		c.inner.Conn, c.target = conn, target
	}
	return c.inner.SendRPC(t, address, expected, timeout)
}

// Close closes the connection.
func (c *tailnetGRPC) Close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.inner.Close()
	c.inner.Conn = nil
}

// tailnetWebSocket is the suite's WebSocket dialer (utils/websocket's
// DefaultDialer: golang.org/x/net/websocket, ws and wss) with its
// connections dialled through the tailnet. The suite's interface takes no
// context: ctx is the test's, and each dial has a minute.
type tailnetWebSocket struct {
	ctx  context.Context
	dial dialFunc
}

// Dial opens a WebSocket connection to rawURL with the given subprotocol.
func (d tailnetWebSocket) Dial(rawURL, protocol, origin string) (*websocket.Conn, error) {
	cfg, err := websocket.NewConfig(rawURL, origin)
	if err != nil {
		return nil, fmt.Errorf("websocket %s: %w", rawURL, err)
	}
	if protocol != "" {
		cfg.Protocol = []string{protocol}
	}
	host, port := cfg.Location.Hostname(), cfg.Location.Port()
	if port == "" {
		port = map[string]string{"wss": "443"}[cfg.Location.Scheme]
		if port == "" {
			port = "80"
		}
	}
	ctx, cancel := context.WithTimeout(d.ctx, time.Minute)
	defer cancel()
	conn, err := d.dial(ctx, "tcp", net.JoinHostPort(host, port))
	if err != nil {
		return nil, fmt.Errorf("websocket %s: dial through the tailnet: %w", rawURL, err)
	}
	if cfg.Location.Scheme == "wss" {
		tc := tls.Client(conn, &tls.Config{ServerName: host})
		if err := tc.HandshakeContext(ctx); err != nil {
			_ = conn.Close()
			return nil, fmt.Errorf("websocket %s: TLS: %w", rawURL, err)
		}
		conn = tc
	}
	ws, err := websocket.NewClient(cfg, conn)
	if err != nil {
		_ = conn.Close()
		return nil, fmt.Errorf("websocket %s: handshake: %w", rawURL, err)
	}
	return ws, nil
}
