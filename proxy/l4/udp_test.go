package l4

import (
	"context"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/charmbracelet/log"

	"github.com/tailplane/tailplane/proxy/metrics"
)

// The hard stop (ctx) ends a UDP relay and its live flows at once, whatever
// their idle timeout: the engine relies on it to honour its drain bound and
// to drop the old role's flows on a role change.
func TestUDPFlowsEndOnHardStop(t *testing.T) {
	upstream, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer upstream.Close()
	go func() {
		buf := make([]byte, 2048)
		for {
			n, from, err := upstream.ReadFrom(buf)
			if err != nil {
				return
			}
			_, _ = upstream.WriteTo(append([]byte("echo:"), buf[:n]...), from)
		}
	}()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	r := NewRelay("l4", (&net.Dialer{}).DialContext, metrics.New(), log.New(io.Discard))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	served := make(chan struct{})
	go func() {
		r.ServeUDP(ctx, pc, func() string { return upstream.LocalAddr().String() }, time.Hour)
		close(served)
	}()
	client, err := net.Dial("udp", pc.LocalAddr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		_ = client.SetDeadline(time.Now().Add(time.Second))
		_, _ = client.Write([]byte("ping"))
		buf := make([]byte, 64)
		n, err := client.Read(buf)
		if err == nil && string(buf[:n]) == "echo:ping" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no echo through the relay: %q, %v", buf[:n], err)
		}
	}

	cancel()
	wctx, wcancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer wcancel()
	if err := r.Wait(wctx); err != nil {
		t.Fatal(fmt.Errorf("a live UDP flow (idle timeout 1h) still open 5 s after the hard stop: %w", err))
	}
	select {
	case <-served:
	case <-wctx.Done():
		t.Fatal("ServeUDP still reading after the hard stop")
	}
}
