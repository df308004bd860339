// Command devcluster-echo is the test echo server devcluster's image map
// ships with (image "ghcr.io/tailplane/echo"). It binds $POD_IP:$PORT
// (default 8080) over TCP (HTTP) and UDP and answers:
//
//	GET /            JSON with the pod name, pod IP, request path and headers
//	GET /file?path=P the content of file P as the pod sees it (for volume tests)
//	GET /env         the process environment as a JSON object
//	GET /args        the command-line arguments as a JSON array
//	GET /lookup?name=N the addresses of name N as the pod resolves it, one a line
//	UDP datagrams    echoed back with the prefix "echo: "
//
// It stops on SIGTERM. Two subcommands make it useful to `kubectl exec` and
// to one-shot containers in images that hold nothing else (the real node's
// echo image): "devcluster-echo cat PATH" prints a file, "devcluster-echo
// write PATH TEXT" writes one, "devcluster-echo get URL" prints an HTTP
// response body (a client inside a pod; SSL_CERT_FILE adds roots) and
// "devcluster-echo lookup NAME" prints the addresses the pod's resolver
// gives NAME; each exits 1 with the error on stderr.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/charmbracelet/log"
)

func main() {
	if len(os.Args) > 1 {
		if code, ok := runTool(os.Args[1:]); ok {
			os.Exit(code)
		}
	}
	logger := log.NewWithOptions(os.Stderr, log.Options{ReportTimestamp: true, Prefix: "echo"})
	ip := os.Getenv("POD_IP")
	if ip == "" {
		ip = "127.0.0.1"
	}
	port := os.Getenv("PORT")
	if port == "" {
		port = "8080"
	}
	addr := net.JoinHostPort(ip, port)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()

	mux := http.NewServeMux()
	mux.HandleFunc("GET /", func(w http.ResponseWriter, r *http.Request) {
		host, _ := os.Hostname()
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{
			"pod": os.Getenv("HOSTNAME"), "host": host, "podIP": ip, "path": r.URL.Path,
			"remote": r.RemoteAddr, "headers": r.Header,
		})
	})
	mux.HandleFunc("GET /file", func(w http.ResponseWriter, r *http.Request) {
		b, err := os.ReadFile(r.URL.Query().Get("path"))
		if err != nil {
			http.Error(w, err.Error(), http.StatusNotFound)
			return
		}
		_, _ = w.Write(b)
	})
	mux.HandleFunc("GET /env", func(w http.ResponseWriter, r *http.Request) {
		env := map[string]string{}
		for _, kv := range os.Environ() {
			if k, v, ok := strings.Cut(kv, "="); ok {
				env[k] = v
			}
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(env)
	})
	mux.HandleFunc("GET /args", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(os.Args)
	})
	// The addresses of a name as the pod resolves it (its /etc/resolv.conf:
	// the cluster DNS with dnsPolicy ClusterFirst), one a line.
	mux.HandleFunc("GET /lookup", func(w http.ResponseWriter, r *http.Request) {
		addrs, err := net.DefaultResolver.LookupHost(r.Context(), r.URL.Query().Get("name"))
		if err != nil {
			http.Error(w, err.Error(), http.StatusNotFound)
			return
		}
		_, _ = io.WriteString(w, strings.Join(addrs, "\n"))
	})
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("ok")) })

	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		logger.Fatal("listen", "addr", addr, "err", err)
	}
	pc, err := lc.ListenPacket(ctx, "udp", addr)
	if err != nil {
		logger.Fatal("listen udp", "addr", addr, "err", err)
	}
	go serveUDP(pc)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		logger.Info("SIGTERM: shutting down")
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
		_ = pc.Close()
	}()
	logger.Info("serving", "addr", addr)
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		logger.Fatal("serve", "err", err)
	}
}

func serveUDP(pc net.PacketConn) {
	buf := make([]byte, 64*1024)
	for {
		n, from, err := pc.ReadFrom(buf)
		if err != nil {
			return
		}
		_, _ = pc.WriteTo(append([]byte("echo: "), buf[:n]...), from)
	}
}

// runTool runs the cat and write subcommands; ok is false for anything else
// (the server's own arguments, such as --mode, which it ignores).
func runTool(args []string) (code int, ok bool) {
	var err error
	switch {
	case args[0] == "cat" && len(args) == 2:
		var b []byte
		if b, err = os.ReadFile(args[1]); err == nil {
			_, err = os.Stdout.Write(b)
		}
	case args[0] == "write" && len(args) == 3:
		err = os.WriteFile(args[1], []byte(args[2]), 0o644)
	case args[0] == "get" && len(args) == 2:
		err = get(args[1])
	case args[0] == "lookup" && len(args) == 2:
		// Through the pod's /etc/resolv.conf (Go's resolver): the
		// cluster DNS and its stub domains.
		var addrs []string
		if addrs, err = net.LookupHost(args[1]); err == nil {
			_, err = os.Stdout.WriteString(strings.Join(addrs, "\n") + "\n")
		}
	default:
		return 0, false
	}
	if err != nil {
		os.Stderr.WriteString("devcluster-echo " + args[0] + ": " + err.Error() + "\n")
		return 1, true
	}
	return 0, true
}

// get prints the body of an HTTP GET of url, failing on a status other than
// 200 or after 10 s.
func get(url string) error {
	client := &http.Client{Timeout: 10 * time.Second}
	resp, err := client.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return errors.New(resp.Status)
	}
	_, err = io.Copy(os.Stdout, resp.Body)
	return err
}
