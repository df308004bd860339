package tailnettest

import (
	"context"
	"io"
	"net/http"
	"testing"
	"time"
)

// Two nodes on the in-process tailnet reach each other over HTTP.
func TestTwoNodesTalk(t *testing.T) {
	tn := New(t, WithAuthKey("tskey-test"))
	server := tn.Node(t, "server")
	client := tn.Node(t, "client")
	ln, err := server.Listen("tcp", ":80")
	if err != nil {
		t.Fatal(err)
	}
	go http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "hello") }))

	ip4, _ := server.TailscaleIPs()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+ip4.String()+"/", nil)
	resp, err := client.HTTPClient().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if string(body) != "hello" {
		t.Fatalf("body %q", body)
	}
}

// A node with the wrong auth key is refused by control.
func TestAuthKeyRequired(t *testing.T) {
	tn := New(t, WithAuthKey("tskey-right"))
	s := tn.Server(t, "intruder")
	s.AuthKey = "tskey-wrong"
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := s.Up(ctx); err == nil {
		t.Fatal("node with a wrong auth key came up")
	}
}
