package gatewayconformance

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/websocket"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	cgrpc "sigs.k8s.io/gateway-api/conformance/utils/grpc"
)

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
