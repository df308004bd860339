package echobasic

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/charmbracelet/log"
	"golang.org/x/net/websocket"
)

// RequestAssertions is the HTTP echo's JSON answer, field for field and in
// echo-basic's order; the suite reads it as roundtripper.CapturedRequest.
type RequestAssertions struct {
	Path     string              `json:"path"`
	Host     string              `json:"host"`
	Method   string              `json:"method"`
	Proto    string              `json:"proto"`
	Headers  map[string][]string `json:"headers"`
	HTTPPort string              `json:"httpPort"`

	PodContext `json:",inline"`

	TLS *TLSAssertions `json:"tls,omitempty"`
}

// TLSAssertions are the TLS facts of an HTTPS request.
type TLSAssertions struct {
	Version            string   `json:"version"`
	PeerCertificates   []string `json:"peerCertificates,omitempty"`
	ServerName         string   `json:"serverName"`
	NegotiatedProtocol string   `json:"negotiatedProtocol,omitempty"`
	CipherSuite        string   `json:"cipherSuite"`
}

// echoHandler answers the HTTP, h2c and HTTPS servers' requests.
type echoHandler struct {
	ctx      PodContext
	httpPort string
	logger   *log.Logger
	// mu guards attempts, the /retry/ handler's failed attempts per uuid.
	mu       sync.Mutex
	attempts map[string]int
}

// newHTTPHandler returns the echo and the HTTP servers' handler: the echo
// behind /health, /status/, /retry/ and /ws.
func newHTTPHandler(c Config, logger *log.Logger) (*echoHandler, http.Handler) {
	h := &echoHandler{ctx: c.Context, httpPort: c.HTTPPort, logger: logger, attempts: map[string]int{}}
	// /status/NNN answers with status NNN.
	statusPath := regexp.MustCompile(`^/status/(\d\d\d)$`)
	mux := http.NewServeMux()
	mux.HandleFunc("/health", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("OK")) })
	mux.HandleFunc("/status/", func(w http.ResponseWriter, r *http.Request) {
		code := http.StatusBadRequest
		if m := statusPath.FindStringSubmatch(r.RequestURI); m != nil {
			code, _ = strconv.Atoi(m[1])
		}
		w.WriteHeader(code)
	})
	mux.HandleFunc("/retry/", h.retry)
	mux.Handle("/ws", websocket.Handler(func(ws *websocket.Conn) { _, _ = io.Copy(ws, ws) }))
	mux.HandleFunc("/", h.echo)
	// echo-basic collapses "//" before routing, so that ServeMux answers a
	// path such as //foo with the echo and not with a redirect.
	return h, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.URL.Path = strings.ReplaceAll(r.URL.Path, "//", "/")
		mux.ServeHTTP(w, r)
	})
}

func (h *echoHandler) echo(w http.ResponseWriter, r *http.Request) {
	// Every request, at info: the suite finds mirrored requests in the
	// backends' logs by this message, as echo-basic writes it.
	h.logger.Info("Echoing back request made to "+r.RequestURI+" to client", "remote", r.RemoteAddr, "proto", r.Proto)
	if err := delay(r, "delay"); err != nil {
		writeError(w, err)
		return
	}
	body, err := json.MarshalIndent(RequestAssertions{
		Path: r.RequestURI, Host: r.Host, Method: r.Method, Proto: r.Proto, Headers: r.Header,
		HTTPPort: h.httpPort, PodContext: h.ctx, TLS: httpTLS(r.TLS),
	}, "", " ")
	if err != nil {
		writeError(w, err)
		return
	}
	// X-Echo-Set-Header: "Name: value, Other: value" become response
	// headers, their names' case kept (the map, not Header.Set).
	for _, list := range r.Header["X-Echo-Set-Header"] {
		for kv := range strings.SplitSeq(list, ",") {
			name, value, _ := strings.Cut(strings.TrimSpace(kv), ":")
			if len(w.Header()[name]) == 0 {
				w.Header()[name] = []string{value}
			} else {
				w.Header()[name][0] += "," + strings.TrimSpace(value)
			}
		}
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	_, _ = w.Write(body)
}

// retry fails the first succeedAfter requests of a uuid, by a reset
// connection or with ?responseCode=, then echoes: the suite's retry tests.
func (h *echoHandler) retry(w http.ResponseWriter, r *http.Request) {
	uuid := r.URL.Query().Get("uuid")
	succeedAfter, err := strconv.Atoi(r.URL.Query().Get("succeedAfter"))
	if uuid == "" || err != nil {
		w.WriteHeader(http.StatusBadRequest)
		_, _ = io.WriteString(w, "uuid and succeedAfter are required")
		return
	}
	h.mu.Lock()
	fail := h.attempts[uuid] < succeedAfter
	if fail {
		h.attempts[uuid]++
	}
	h.mu.Unlock()
	if !fail {
		h.echo(w, r)
		return
	}
	if err := delay(r, "delayRetry"); err != nil {
		writeError(w, err)
		return
	}
	if code, err := strconv.Atoi(r.URL.Query().Get("responseCode")); err == nil {
		w.WriteHeader(code)
		return
	}
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		writeError(w, fmt.Errorf("hijack: %w", err))
		return
	}
	if tcp, ok := conn.(*net.TCPConn); ok {
		_ = tcp.SetLinger(0) // a TCP RST, not a clean close
	}
	_ = conn.Close()
}

// delay waits for the duration in query parameter key, if any.
func delay(r *http.Request, key string) error {
	v := r.FormValue(key)
	if v == "" {
		return nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return fmt.Errorf("%s=%q: %w", key, v, err)
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-r.Context().Done():
		return r.Context().Err()
	}
}

func writeError(w http.ResponseWriter, err error) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusInternalServerError)
	_ = json.NewEncoder(w).Encode(map[string]string{"message": err.Error()})
}

// tlsVersionName is echo-basic's name of a TLS version (HTTP and gRPC; its
// TCP echo uses tls.VersionName), "" for others.
func tlsVersionName(v uint16) string {
	switch v {
	case tls.VersionTLS13:
		return "TLSv1.3"
	case tls.VersionTLS12:
		return "TLSv1.2"
	case tls.VersionTLS11:
		return "TLSv1.1"
	case tls.VersionTLS10:
		return "TLSv1.0"
	}
	return ""
}

// peerPEMs are the peer's certificates as PEM blocks.
func peerPEMs(certs []*x509.Certificate) []string {
	var out []string
	for _, c := range certs {
		out = append(out, string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})))
	}
	return out
}

func httpTLS(s *tls.ConnectionState) *TLSAssertions {
	if s == nil {
		return nil
	}
	return &TLSAssertions{
		Version: tlsVersionName(s.Version), PeerCertificates: peerPEMs(s.PeerCertificates),
		ServerName: s.ServerName, NegotiatedProtocol: s.NegotiatedProtocol, CipherSuite: tls.CipherSuiteName(s.CipherSuite),
	}
}

// serverTLS loads the server certificate and, with clientCA, verifies the
// client certificates given (unauthenticated clients are still served).
func serverTLS(certFile, keyFile, clientCA string) (*tls.Config, error) {
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("server certificate: %w", err)
	}
	cfg := &tls.Config{Certificates: []tls.Certificate{cert}}
	if clientCA != "" {
		pemBytes, err := os.ReadFile(clientCA)
		if err != nil {
			return nil, fmt.Errorf("client CA: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pemBytes) {
			return nil, fmt.Errorf("client CA %s: no certificate", clientCA)
		}
		cfg.ClientAuth, cfg.ClientCAs = tls.VerifyClientCertIfGiven, pool
	}
	return cfg, nil
}

func startHTTP(ctx context.Context, c Config, s *Servers, logger *log.Logger) error {
	echo, handler := newHTTPHandler(c, logger)
	l, err := s.listen(ctx, "http", c.Host, c.HTTPPort)
	if err != nil {
		return err
	}
	plain := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second}
	s.stops = append(s.stops, func() { _ = plain.Close() })
	s.serve("http", func() error { return plain.Serve(l) })

	// h2c answers HTTP/2 without TLS (prior knowledge or Upgrade: h2c)
	// with the echo alone, whatever the path, and refuses other HTTP/1.1
	// requests, as echo-basic's.
	hl, err := s.listen(ctx, "h2c", c.Host, c.H2CPort)
	if err != nil {
		return err
	}
	protocols := new(http.Protocols)
	protocols.SetHTTP1(true)
	protocols.SetUnencryptedHTTP2(true)
	h2c := &http.Server{ReadHeaderTimeout: time.Second, Protocols: protocols,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.ProtoMajor != 2 && r.Header.Get("Upgrade") != "h2c" {
				w.WriteHeader(http.StatusBadRequest)
				_, _ = io.WriteString(w, "Expected h2c request")
				return
			}
			echo.echo(w, r)
		})}
	s.stops = append(s.stops, func() { _ = h2c.Close() })
	s.serve("h2c", func() error { return h2c.Serve(hl) })

	if !c.tls() {
		return nil
	}
	cfg, err := serverTLS(c.CertFile, c.KeyFile, c.ClientCAFile)
	if err != nil {
		return err
	}
	tl, err := s.listen(ctx, "https", c.Host, c.HTTPSPort)
	if err != nil {
		return err
	}
	https := &http.Server{Handler: handler, TLSConfig: cfg, ReadHeaderTimeout: 10 * time.Second}
	s.stops = append(s.stops, func() { _ = https.Close() })
	s.serve("https", func() error { return https.ServeTLS(tl, "", "") })
	return nil
}
