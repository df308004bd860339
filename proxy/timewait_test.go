package proxy

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/adapters/gonet"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/link/pipe"
	"gvisor.dev/gvisor/pkg/tcpip/network/ipv4"
	"gvisor.dev/gvisor/pkg/tcpip/stack"
	"gvisor.dev/gvisor/pkg/tcpip/transport/tcp"
	"gvisor.dev/gvisor/pkg/waiter"
)

// A client that reconnects from the port of a connection the server closed
// first (a userspace client's random ephemeral port can do that) is answered
// within seconds when the server's TIME_WAIT is shortened, and not at all
// within them with gVisor's default: the server accepts through a forwarder
// as Tailscale's netstack does, so no listening endpoint takes the SYN over.
func TestShortTimeWaitAnswersAReusedClientPort(t *testing.T) {
	for _, tc := range []struct {
		name     string
		shorten  bool
		answered bool
	}{
		{"gVisor's default TIME_WAIT", false, false},
		{"shortened TIME_WAIT", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			clientLink, serverLink := pipe.New("", "", 1280)
			client := newTestStack(t, clientLink, "\x0a\x00\x00\x01")
			server := newTestStack(t, serverLink, "\x0a\x00\x00\x02")
			if tc.shorten {
				if err := shortenTimeWait(server); err != nil {
					t.Fatal(err)
				}
			}
			serveHelloAndClose(server)
			local := tcpip.FullAddress{NIC: 1, Addr: tcpip.AddrFromSlice([]byte{10, 0, 0, 1}), Port: 40000}
			remote := tcpip.FullAddress{NIC: 1, Addr: tcpip.AddrFromSlice([]byte{10, 0, 0, 2}), Port: 80}

			if err := fetchHello(t.Context(), client, local, remote, 5*time.Second); err != nil {
				t.Fatalf("first connection: %v", err)
			}
			err := fetchHello(t.Context(), client, local, remote, 5*time.Second)
			if answered := err == nil; answered != tc.answered {
				t.Fatalf("second connection from the same port: answered %v (%v), want %v", answered, err, tc.answered)
			}
		})
	}
}

func newTestStack(t *testing.T, link stack.LinkEndpoint, addr string) *stack.Stack {
	t.Helper()
	s := stack.New(stack.Options{
		NetworkProtocols:   []stack.NetworkProtocolFactory{ipv4.NewProtocol},
		TransportProtocols: []stack.TransportProtocolFactory{tcp.NewProtocol},
	})
	t.Cleanup(s.Destroy)
	if err := s.CreateNIC(1, link); err != nil {
		t.Fatal(err)
	}
	pa := tcpip.ProtocolAddress{Protocol: ipv4.ProtocolNumber, AddressWithPrefix: tcpip.AddrFromSlice([]byte(addr)).WithPrefix()}
	if err := s.AddProtocolAddress(1, pa, stack.AddressProperties{}); err != nil {
		t.Fatal(err)
	}
	s.SetRouteTable([]tcpip.Route{{Destination: header.IPv4EmptySubnet, NIC: 1}})
	return s
}

// serveHelloAndClose accepts TCP connections through a forwarder, writes
// "hello" and closes first, so that the server side keeps TIME_WAIT.
func serveHelloAndClose(s *stack.Stack) {
	fwd := tcp.NewForwarder(s, 0, 16, func(r *tcp.ForwarderRequest) {
		var wq waiter.Queue
		ep, err := r.CreateEndpoint(&wq)
		if err != nil {
			r.Complete(true)
			return
		}
		r.Complete(false)
		c := gonet.NewTCPConn(&wq, ep)
		_, _ = c.Write([]byte("hello"))
		_ = c.Close()
	})
	s.SetTransportProtocolHandler(tcp.ProtocolNumber, fwd.HandlePacket)
}

// fetchHello connects from local to remote within timeout and reads the
// server's greeting to its end. The local port is held by the previous
// connection until its last ACK is processed: binding polls for it.
func fetchHello(ctx context.Context, s *stack.Stack, local, remote tcpip.FullAddress, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	poll := time.NewTicker(10 * time.Millisecond)
	defer poll.Stop()
	for {
		c, err := gonet.DialTCPWithBind(ctx, s, local, remote, ipv4.ProtocolNumber)
		if err != nil && strings.Contains(err.Error(), (&tcpip.ErrPortInUse{}).String()) {
			select {
			case <-ctx.Done():
				return err
			case <-poll.C:
				continue
			}
		}
		if err != nil {
			return err
		}
		defer c.Close()
		b, err := io.ReadAll(c)
		if err != nil || string(b) != "hello" {
			return errors.Join(err, errors.New("read "+string(b)))
		}
		return nil
	}
}
