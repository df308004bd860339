package echobasic

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"

	"github.com/charmbracelet/log"
)

// Mode is which of echo-basic's servers a process runs.
type Mode string

// The modes, chosen as echo-basic chooses them: by environment variable,
// or by CoreDNS's "-conf" argument for the DNS stand-in.
const (
	ModeHTTP Mode = "http"
	ModeGRPC Mode = "grpc"
	ModeTCP  Mode = "tcp"
	ModeUDP  Mode = "udp"
	ModeDNS  Mode = "dns"
)

// PodContext is where the server runs, echoed in every answer.
type PodContext struct {
	Namespace string `json:"namespace"`
	Ingress   string `json:"ingress"`
	Service   string `json:"service"`
	Pod       string `json:"pod"`
}

// Config is one process's servers. Ports are "" for echo-basic's defaults;
// tests set "0" for any free port (Listener addresses are then in the
// Servers that Start returns).
type Config struct {
	Mode    Mode
	Context PodContext
	// Host is the address listeners bind ("" for all, as echo-basic).
	Host string
	// HTTPPort, H2CPort and HTTPSPort are the HTTP mode's (and HTTPPort,
	// HTTPSPort the gRPC mode's) ports.
	HTTPPort, H2CPort, HTTPSPort string
	// TCPPort and TLSPort are the TCP mode's, UDPPort the UDP mode's and
	// DNSPort the DNS stand-in's.
	TCPPort, TLSPort, UDPPort, DNSPort string
	// CertFile and KeyFile are the server certificate and key (the HTTP
	// mode reads TLS_SERVER_PRIVKEY, the gRPC and TCP modes
	// TLS_SERVER_PRIV_KEY, as echo-basic does); ClientCAFile, when set,
	// verifies client certificates given over HTTPS.
	CertFile, KeyFile, ClientCAFile string
	// Corefile is the DNS stand-in's configuration file.
	Corefile string
}

// FromEnv builds the Config of a process from its environment and
// arguments, with echo-basic's variable names and defaults.
func FromEnv(getenv func(string) string, args []string) (Config, error) {
	or := func(key, def string) string {
		if v := getenv(key); v != "" {
			return v
		}
		return def
	}
	c := Config{
		Mode: ModeHTTP,
		Context: PodContext{
			Namespace: getenv("NAMESPACE"), Ingress: getenv("INGRESS_NAME"),
			Service: getenv("SERVICE_NAME"), Pod: getenv("POD_NAME"),
		},
		HTTPPort: or("HTTP_PORT", "3000"), H2CPort: or("H2C_PORT", "3001"), HTTPSPort: or("HTTPS_PORT", "8443"),
		TCPPort: or("TCP_PORT", "3000"), TLSPort: or("TLS_PORT", "8443"), UDPPort: or("UDP_PORT", "8080"),
		DNSPort: "53", CertFile: getenv("TLS_SERVER_CERT"), KeyFile: getenv("TLS_SERVER_PRIVKEY"),
		ClientCAFile: getenv("TLS_CLIENT_CACERTS"),
	}
	switch {
	case len(args) > 0:
		// The only arguments the manifests give are CoreDNS's.
		if len(args) != 2 || args[0] != "-conf" {
			return c, fmt.Errorf("arguments %q: want none (echo-basic) or -conf FILE (CoreDNS)", args)
		}
		c.Mode, c.Corefile = ModeDNS, args[1]
	case getenv("GRPC_ECHO_SERVER") != "":
		c.Mode, c.KeyFile = ModeGRPC, getenv("TLS_SERVER_PRIV_KEY")
	case getenv("TCP_ECHO_SERVER") != "":
		c.Mode, c.KeyFile = ModeTCP, getenv("TLS_SERVER_PRIV_KEY")
	case getenv("UDP_ECHO_SERVER") != "":
		c.Mode = ModeUDP
	}
	return c, nil
}

// tls reports whether the Config has a server certificate.
func (c Config) tls() bool { return c.CertFile != "" && c.KeyFile != "" }

// Servers are the running servers of one Config.
type Servers struct {
	// Addrs maps each server's name ("http", "h2c", "https", "grpc",
	// "grpc-tls", "tcp", "tls", "udp", "dns") to its bound address.
	Addrs map[string]string
	done  chan error
	stops []func()
}

// Wait blocks until a server fails or ctx ends, then stops them all.
func (s *Servers) Wait(ctx context.Context) error {
	defer s.Stop()
	select {
	case err := <-s.done:
		return err
	case <-ctx.Done():
		return nil
	}
}

// Stop closes every listener.
func (s *Servers) Stop() {
	for _, stop := range s.stops {
		stop()
	}
	s.stops = nil
}

// serve runs fn in the background; its error (other than a closed
// listener's) ends Wait.
func (s *Servers) serve(name string, fn func() error) {
	go func() {
		err := fn()
		if err != nil && !errors.Is(err, net.ErrClosed) && !errors.Is(err, http.ErrServerClosed) {
			select {
			case s.done <- fmt.Errorf("%s server: %w", name, err):
			default:
			}
		}
	}()
}

// Start binds the servers of c's mode and serves them in the background.
func Start(ctx context.Context, c Config, logger *log.Logger) (*Servers, error) {
	s := &Servers{Addrs: map[string]string{}, done: make(chan error, 1)}
	var err error
	switch c.Mode {
	case ModeHTTP:
		err = startHTTP(ctx, c, s, logger)
	case ModeGRPC:
		err = startGRPC(ctx, c, s, logger)
	case ModeTCP:
		err = startTCP(ctx, c, s, logger)
	case ModeUDP:
		err = startUDP(ctx, c, s, logger)
	case ModeDNS:
		err = startDNS(ctx, c, s, logger)
	default:
		err = fmt.Errorf("unknown mode %q", c.Mode)
	}
	if err != nil {
		s.Stop()
		return nil, fmt.Errorf("echo-basic %s mode: %w", c.Mode, err)
	}
	for name, addr := range s.Addrs {
		logger.Info("listening", "server", name, "addr", addr, "pod", c.Context.Pod)
	}
	return s, nil
}

// listen binds TCP host:port and registers the listener to be closed.
func (s *Servers) listen(ctx context.Context, name, host, port string) (net.Listener, error) {
	l, err := (&net.ListenConfig{}).Listen(ctx, "tcp", net.JoinHostPort(host, port))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	s.Addrs[name] = l.Addr().String()
	s.stops = append(s.stops, func() { _ = l.Close() })
	return l, nil
}
