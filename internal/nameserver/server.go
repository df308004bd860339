package nameserver

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/charmbracelet/log"
	"github.com/miekg/dns"
)

// Defaults of the official nameserver: where the ConfigMap is mounted, the
// port (the Service maps 53 to it), and the zone it answers for.
const (
	DefaultRecordsPath = "/config/" + RecordsKey
	DefaultListen      = ":1053"
	DefaultZone        = "ts.net"
	// DefaultReload is how often the records file is read again. kubelet
	// refreshes a mounted ConfigMap within about a minute, so a few seconds
	// more cost nothing; reading a small file this often costs little.
	DefaultReload = 2 * time.Second
)

// Server answers A and AAAA queries for names under Zone from the records
// file at Path, read again every Reload.
type Server struct {
	// Path is the records file (records.json). A missing file is no records.
	Path string
	// Zone is the domain answered for (DefaultZone when empty): other names
	// are REFUSED, as the official nameserver does.
	Zone string
	// Reload is how often Path is read again (DefaultReload when zero).
	Reload time.Duration
	// Log gets a line for every change of the records and every bad record.
	Log *log.Logger

	mu    sync.RWMutex
	table Table
	raw   []byte
}

// Load reads the records file and, when it changed, replaces the records.
// A file that cannot be parsed leaves the previous records in place (a
// broken update must not blank every name) and is returned as an error.
func (s *Server) Load() error {
	data, err := os.ReadFile(s.Path)
	if errors.Is(err, os.ErrNotExist) {
		data, err = nil, nil
	}
	if err != nil {
		return fmt.Errorf("read DNS records %s: %w", s.Path, err)
	}
	s.mu.RLock()
	same := s.table.IP4 != nil && bytes.Equal(data, s.raw)
	s.mu.RUnlock()
	if same {
		return nil
	}
	t, skipped, err := Parse(data)
	if err != nil {
		return fmt.Errorf("%s: %w", s.Path, err)
	}
	for _, m := range skipped {
		s.logger().Warn("DNS record skipped", "why", m)
	}
	s.mu.Lock()
	s.table, s.raw = t, data
	s.mu.Unlock()
	s.logger().Info("DNS records loaded", "ipv4Names", len(t.IP4), "ipv6Names", len(t.IP6))
	return nil
}

func (s *Server) logger() *log.Logger {
	if s.Log == nil {
		return log.Default()
	}
	return s.Log
}

func (s *Server) zone() string {
	if s.Zone == "" {
		return Canonical(DefaultZone)
	}
	return Canonical(s.Zone)
}

// ListenAndServe listens on addr over UDP and TCP and serves until ctx ends.
func (s *Server) ListenAndServe(ctx context.Context, addr string) error {
	pc, err := (&net.ListenConfig{}).ListenPacket(ctx, "udp", addr)
	if err != nil {
		return fmt.Errorf("listen udp %s: %w", addr, err)
	}
	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", addr)
	if err != nil {
		pc.Close()
		return fmt.Errorf("listen tcp %s: %w", addr, err)
	}
	return s.Serve(ctx, pc, ln)
}

// Serve loads the records, then answers on pc (UDP) and ln (TCP) and reloads
// the records until ctx ends; it closes both.
func (s *Server) Serve(ctx context.Context, pc net.PacketConn, ln net.Listener) error {
	if err := s.Load(); err != nil {
		// Serve anyway: the names are NXDOMAIN until a good file arrives,
		// which is what an empty ConfigMap means too.
		s.logger().Error("DNS records not loaded", "err", err)
	}
	mux := dns.NewServeMux()
	mux.HandleFunc(s.zone(), s.answer)
	servers := []*dns.Server{{PacketConn: pc, Handler: mux}, {Listener: ln, Handler: mux}}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make(chan error, len(servers))
	for _, srv := range servers {
		go func() { errs <- srv.ActivateAndServe() }()
	}
	go s.reload(ctx)
	var err error
	select {
	case <-ctx.Done():
	case err = <-errs:
		err = fmt.Errorf("serve DNS: %w", err)
	}
	for _, srv := range servers {
		_ = srv.ShutdownContext(context.WithoutCancel(ctx))
	}
	return err
}

func (s *Server) reload(ctx context.Context) {
	every := s.Reload
	if every <= 0 {
		every = DefaultReload
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := s.Load(); err != nil {
				s.logger().Error("DNS records not reloaded, keeping the previous ones", "err", err)
			}
		}
	}
}

// Lookup returns the records of name (any case, with or without the dot).
func (s *Server) Lookup(name string) (ip4, ip6 []string) {
	fqdn := Canonical(name)
	s.mu.RLock()
	defer s.mu.RUnlock()
	for _, a := range s.table.IP4[fqdn] {
		ip4 = append(ip4, a.String())
	}
	for _, a := range s.table.IP6[fqdn] {
		ip6 = append(ip6, a.String())
	}
	return ip4, ip6
}

// answer is authoritative for the zone, as the official nameserver: A and
// AAAA from the records, NXDOMAIN for a name with neither, NOERROR with no
// answer for AAAA of a name with only IPv4 (RFC 4074), NOTIMP for other
// types.
func (s *Server) answer(w dns.ResponseWriter, r *dns.Msg) {
	m := new(dns.Msg)
	q := r.Question[0]
	if q.Qtype != dns.TypeA && q.Qtype != dns.TypeAAAA {
		m.SetRcode(r, dns.RcodeNotImplemented)
		_ = w.WriteMsg(m)
		return
	}
	m.SetRcode(r, dns.RcodeSuccess)
	m.Authoritative, m.RecursionAvailable = true, false
	ip4, ip6 := s.Lookup(q.Name)
	switch {
	case len(ip4) == 0 && len(ip6) == 0:
		m.Rcode = dns.RcodeNameError
	case q.Qtype == dns.TypeA:
		for _, ip := range ip4 {
			// TTL 0, as the official: Pod IPs change when a proxy restarts.
			m.Answer = append(m.Answer, &dns.A{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeA, Class: dns.ClassINET}, A: net.ParseIP(ip)})
		}
	default:
		for _, ip := range ip6 {
			m.Answer = append(m.Answer, &dns.AAAA{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeAAAA, Class: dns.ClassINET}, AAAA: net.ParseIP(ip)})
		}
	}
	if err := w.WriteMsg(m); err != nil && !strings.Contains(err.Error(), "closed") {
		s.logger().Warn("DNS answer not sent", "name", q.Name, "err", err)
	}
}
