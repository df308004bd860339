package testenv

import (
	"net"
	"testing"
)

// ListenUDPAndTCP opens UDP and TCP listeners on one loopback port, as a DNS
// server serves both. The kernel picks a free UDP port, but another process
// may hold the TCP port of the same number, so a few ports are tried before
// the test fails. Both are closed when the test ends.
func ListenUDPAndTCP(t testing.TB) (net.PacketConn, net.Listener) {
	t.Helper()
	var lastErr error
	for range 20 {
		pc, err := net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("listen on loopback UDP: %v", err)
		}
		ln, err := net.Listen("tcp", pc.LocalAddr().String())
		if err == nil {
			t.Cleanup(func() { pc.Close(); ln.Close() })
			return pc, ln
		}
		lastErr = err
		pc.Close()
	}
	t.Fatalf("no loopback port free for both UDP and TCP: %v", lastErr)
	return nil, nil
}
