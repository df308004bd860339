package benchmark

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// BenchmarkL7Ceiling measures tailplane-proxy against no proxy at all: a
// tsnet node that answers the same small body itself (servenode -direct),
// on the same tailnet, from the same client node. The direct node is the
// ceiling of any proxy here: the client, WireGuard and the userspace
// network stack cost the same; the proxy adds its hop to the loopback
// backend and its L7 work. ratio-req/s is tailplane over direct.
func BenchmarkL7Ceiling(b *testing.B) {
	pair := &sideBySide{targets: plainPair(b, "direct", "-direct", "-body", smallBody)}
	pair.run(b, "small", (*target).small, "req/s", "p99-ms")
}

// BenchmarkProxyWebSocket runs WebSocket echoes through tailplane-proxy
// (plain HTTP on :80) and tailscale serve side by side, as BenchmarkProxy:
// `concurrency` connections, each sending b.N/concurrency small messages
// and waiting for each echo from the loopback backend. It reports
// messages/s and the p99 round trip.
func BenchmarkProxyWebSocket(b *testing.B) {
	pair := &sideBySide{targets: plainPair(b, "serve")}
	pair.run(b, "echo", (*target).echo, "msg/s", "p99-ms")
}

// echo opens `concurrency` WebSocket connections to /ws and sends b.N
// messages in all, each waiting for its echo.
func (t *target) echo(b *testing.B) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	conns := make([]*websocket.Conn, concurrency)
	for i := range conns {
		c, resp, err := websocket.Dial(ctx, "ws://"+t.host+"/ws", &websocket.DialOptions{HTTPClient: t.client})
		if err != nil {
			b.Fatalf("%s: websocket dial: %v", t.name, err)
		}
		if resp.StatusCode != http.StatusSwitchingProtocols {
			b.Fatalf("%s: websocket dial answered %d", t.name, resp.StatusCode)
		}
		conns[i] = c
	}
	defer func() {
		for _, c := range conns {
			_ = c.Close(websocket.StatusNormalClosure, "")
		}
	}()
	msg := []byte(smallBody)
	lat := make([][]time.Duration, concurrency)
	errs := make([]error, concurrency)
	var wg sync.WaitGroup
	start := time.Now()
	for w, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < b.N; i += concurrency {
				t0 := time.Now()
				if err := c.Write(ctx, websocket.MessageText, msg); err != nil {
					errs[w] = err
					return
				}
				_, got, err := c.Read(ctx)
				if err != nil || string(got) != smallBody {
					errs[w] = err
					if err == nil {
						errs[w] = errWrongEcho
					}
					return
				}
				lat[w] = append(lat[w], time.Since(t0))
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	for _, err := range errs {
		if err != nil {
			b.Fatalf("%s: %v", t.name, err)
		}
	}
	all := slices.Concat(lat...)
	slices.Sort(all)
	t.report(b, "msg/s", float64(b.N)/elapsed.Seconds())
	t.report(b, "p99-ms", ms(all[len(all)*99/100]))
	t.reportRSS(b)
}

// errWrongEcho: the backend's echo was not the message sent.
var errWrongEcho = errors.New("the echo differs from the message")

// echoWebSocket is the backend's /ws: it echoes every message.
func echoWebSocket(w http.ResponseWriter, r *http.Request) {
	c, err := websocket.Accept(w, r, nil)
	if err != nil {
		return
	}
	defer c.CloseNow()
	for {
		typ, msg, err := c.Read(r.Context())
		if err != nil {
			return
		}
		if err := c.Write(r.Context(), typ, msg); err != nil {
			return
		}
	}
}
