package proxy

import (
	"bytes"
	"context"
	"crypto/tls"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/tailplane/tailplane/proxy/config"
)

// peekSNI reads the server name of a real ClientHello and replays every
// byte it read; anything else is an error, without writing to the client.
func TestPeekSNI(t *testing.T) {
	client, server := net.Pipe()
	defer client.Close()
	defer server.Close()
	// The client's handshake fails once the server side closes; what it
	// wrote is what the peek must replay.
	var sent bytes.Buffer
	go func() {
		_ = tls.Client(recordConn{Conn: client, w: &sent}, &tls.Config{ServerName: "db.example.com"}).Handshake()
	}()
	sni, replay, err := peekSNI(context.Background(), server, 5*time.Second)
	if err != nil || sni != "db.example.com" {
		t.Fatalf("peekSNI: %q, %v; want db.example.com", sni, err)
	}
	got := make([]byte, sent.Len())
	if _, err := io.ReadFull(replay, got); err != nil || !bytes.Equal(got, sent.Bytes()) {
		t.Errorf("replayed %d bytes (%v), want the %d the client sent, unchanged", len(got), err, sent.Len())
	}

	client2, server2 := net.Pipe()
	defer server2.Close()
	go func() { io.WriteString(client2, "GET / HTTP/1.1\r\n\r\n"); client2.Close() }()
	if _, _, err := peekSNI(context.Background(), server2, 5*time.Second); err == nil {
		t.Error("peekSNI accepted plain HTTP")
	}
}

// recordConn copies what is written to w.
type recordConn struct {
	net.Conn
	w io.Writer
}

func (c recordConn) Write(p []byte) (int, error) {
	c.w.Write(p)
	return c.Conn.Write(p)
}

// A listener's missing Secret refuses the config with the listener's path.
func TestGatewayCertsMissingSecret(t *testing.T) {
	ns := env.Namespace(t)
	e := &Engine{opts: Options{Kube: env.Clientset(t), Namespace: ns}}
	g := &config.Gateway{Listeners: []config.Listener{
		{Name: "http", Port: 80, Protocol: config.ListenerHTTP},
		{Name: "https", Port: 443, Protocol: config.ListenerHTTPS, TLS: &config.TLS{Mode: config.TLSSecret, SecretName: "nope"}},
	}}
	_, _, err := e.gatewayCerts(context.Background(), g)
	if want := "gateway.listeners[1].tls.secretName: TLS Secret " + ns + "/nope not found"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("error %v, want %q", err, want)
	}
}
