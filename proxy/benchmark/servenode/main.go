// Command servenode is the baseline of the proxy benchmark: a bare tsnet
// node that proxies port 80 (or, with -https, 443 with the certificate in
// its state folder) to a backend with tailscale's own serve, set through
// its LocalClient exactly as `tailscale serve` would. With -direct it
// proxies nothing: it answers HTTP on port 80 itself with the body of
// -body, the ceiling of any proxy on the same tailnet.
//
// It is a benchmark helper, not a product; it imports tsnet and the
// standard library.
package main

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"tailscale.com/ipn"
	"tailscale.com/tsnet"
)

func main() {
	control := flag.String("control", "", "control server URL")
	hostname := flag.String("hostname", "serve-node", "tailnet hostname")
	backend := flag.String("backend", "", "backend URL, e.g. http://127.0.0.1:8080")
	dir := flag.String("dir", "", "state folder")
	https := flag.Bool("https", false, "serve HTTPS on 443 with the node's certificate (as an official Ingress proxy does) instead of HTTP on 80")
	direct := flag.Bool("direct", false, "answer HTTP on port 80 from this node with -body instead of proxying (no backend)")
	body := flag.String("body", "hello\n", "the body -direct answers")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	s := &tsnet.Server{Dir: *dir, Hostname: *hostname, ControlURL: *control, Logf: func(string, ...any) {}}
	defer s.Close()
	var err error
	if *direct {
		err = runDirect(ctx, s, *body)
	} else {
		err = runServe(ctx, s, *backend, *https)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "servenode:", err)
		s.Close()
		os.Exit(1)
	}
}

// up brings s onto the tailnet and returns its MagicDNS name.
func up(ctx context.Context, s *tsnet.Server) (string, error) {
	upCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	st, err := s.Up(upCtx)
	if err != nil {
		return "", err
	}
	return strings.TrimSuffix(st.Self.DNSName, "."), nil
}

// runServe proxies to backend with tailscale's serve until ctx ends.
func runServe(ctx context.Context, s *tsnet.Server, backend string, https bool) error {
	fqdn, err := up(ctx, s)
	if err != nil {
		return err
	}
	lc, err := s.LocalClient()
	if err != nil {
		return err
	}
	port, handler := uint16(80), &ipn.TCPPortHandler{HTTP: true}
	if https {
		port, handler = 443, &ipn.TCPPortHandler{HTTPS: true}
	}
	sc := &ipn.ServeConfig{
		TCP: map[uint16]*ipn.TCPPortHandler{port: handler},
		Web: map[ipn.HostPort]*ipn.WebServerConfig{
			ipn.HostPort(fmt.Sprintf("%s:%d", fqdn, port)): {Handlers: map[string]*ipn.HTTPHandler{"/": {Proxy: backend}}},
		},
	}
	if err := lc.SetServeConfig(ctx, sc); err != nil {
		return fmt.Errorf("set serve config: %w", err)
	}
	fmt.Println("ready", fqdn)
	<-ctx.Done()
	return nil
}

// runDirect answers HTTP on the node's port 80 itself until ctx ends: a
// tsnet listener and net/http, no proxy hop.
func runDirect(ctx context.Context, s *tsnet.Server, body string) error {
	fqdn, err := up(ctx, s)
	if err != nil {
		return err
	}
	ln, err := s.Listen("tcp", ":80")
	if err != nil {
		return fmt.Errorf("listen on the tailnet: %w", err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte(body))
	}), ReadHeaderTimeout: 10 * time.Second}
	go func() { <-ctx.Done(); _ = srv.Close() }()
	fmt.Println("ready", fqdn)
	if err := srv.Serve(ln); err != nil && err != http.ErrServerClosed {
		return err
	}
	return nil
}
