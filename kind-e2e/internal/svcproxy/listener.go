package svcproxy

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/charmbracelet/log"
	corev1 "k8s.io/api/core/v1"
)

// listener serves one frontend and picks backends round-robin.
type listener struct {
	log      *log.Logger
	mu       sync.Mutex
	backends []string
	next     atomic.Uint64
	tcp      net.Listener
	udp      net.PacketConn
	cancel   context.CancelFunc
}

func listen(f frontend, logger *log.Logger) (*listener, error) {
	ctx, cancel := context.WithCancel(context.Background())
	l := &listener{log: logger, cancel: cancel}
	var lc net.ListenConfig
	var err error
	switch f.proto {
	case corev1.ProtocolUDP:
		l.udp, err = lc.ListenPacket(ctx, "udp", f.addr)
		if err == nil {
			go l.serveUDP(ctx)
		}
	default:
		l.tcp, err = lc.Listen(ctx, "tcp", f.addr)
		if err == nil {
			go l.serveTCP(ctx)
		}
	}
	if err != nil {
		cancel()
		return nil, err
	}
	return l, nil
}

func (l *listener) setBackends(b []string) {
	l.mu.Lock()
	l.backends = b
	l.mu.Unlock()
}

func (l *listener) pick() (string, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.backends) == 0 {
		return "", false
	}
	return l.backends[l.next.Add(1)%uint64(len(l.backends))], true
}

func (l *listener) close() {
	l.cancel()
	if l.tcp != nil {
		_ = l.tcp.Close()
	}
	if l.udp != nil {
		_ = l.udp.Close()
	}
}

func (l *listener) serveTCP(ctx context.Context) {
	for {
		c, err := l.tcp.Accept()
		if err != nil {
			return
		}
		go l.relayTCP(ctx, c)
	}
}

func (l *listener) relayTCP(ctx context.Context, c net.Conn) {
	defer c.Close()
	backend, ok := l.pick()
	if !ok {
		return // no ready endpoints: refuse by closing, like a REJECT rule
	}
	d := net.Dialer{Timeout: 5 * time.Second}
	b, err := d.DialContext(ctx, "tcp", backend)
	if err != nil {
		l.log.Debug("service proxy: dial", "backend", backend, "err", err)
		return
	}
	defer b.Close()
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		if cw, ok := dst.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite()
		}
		done <- struct{}{}
	}
	go pipe(b, c)
	go pipe(c, b)
	select {
	case <-done:
		<-done
	case <-ctx.Done():
	}
}

// serveUDP keeps one backend socket per client address and relays replies.
func (l *listener) serveUDP(ctx context.Context) {
	var mu sync.Mutex
	sessions := map[string]net.Conn{}
	buf := make([]byte, 64*1024)
	for {
		n, client, err := l.udp.ReadFrom(buf)
		if err != nil {
			if !errors.Is(err, net.ErrClosed) {
				l.log.Debug("service proxy: udp read", "err", err)
			}
			mu.Lock()
			for _, s := range sessions {
				_ = s.Close()
			}
			mu.Unlock()
			return
		}
		mu.Lock()
		s, ok := sessions[client.String()]
		mu.Unlock()
		if !ok {
			backend, found := l.pick()
			if !found {
				continue
			}
			var d net.Dialer
			s, err = d.DialContext(ctx, "udp", backend)
			if err != nil {
				continue
			}
			mu.Lock()
			sessions[client.String()] = s
			mu.Unlock()
			go func(s net.Conn, client net.Addr) {
				reply := make([]byte, 64*1024)
				for {
					_ = s.SetReadDeadline(time.Now().Add(udpIdle))
					n, err := s.Read(reply)
					if err != nil {
						break
					}
					_, _ = l.udp.WriteTo(reply[:n], client)
				}
				mu.Lock()
				delete(sessions, client.String())
				mu.Unlock()
				_ = s.Close()
			}(s, client)
		}
		_, _ = s.Write(buf[:n])
	}
}
