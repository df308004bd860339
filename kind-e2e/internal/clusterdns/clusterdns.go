// Package clusterdns is the process node's cluster DNS, what CoreDNS is to a
// kind cluster: pods with dnsPolicy ClusterFirst get it as their nameserver
// (kind-e2e/internal/node writes their /etc/resolv.conf). It answers, over
// UDP and TCP on port 53 of one address:
//
//   - the cluster domain (cluster.local): <service>.<namespace>.svc.<domain>
//     is the Service's ClusterIP (A or AAAA), a headless Service's ready
//     endpoint addresses, or an ExternalName Service's CNAME (followed when
//     the target is a name this server knows, forwarded otherwise); every
//     other name in the domain is NXDOMAIN, as CoreDNS's kubernetes plugin
//     answers;
//   - the names of a hosts-style records file (D/dns-records: "ADDRESS NAME
//     [NAME...]" lines, re-read when it changes), authoritatively, as
//     CoreDNS's hosts plugin does: a test zone that tests fill at run time;
//   - everything else, forwarded to the host's resolver (the first nameserver
//     of /etc/resolv.conf), as CoreDNS's `forward . /etc/resolv.conf`; SERVFAIL
//     when there is none or it does not answer.
//
// It imports client-go (the Service informer) and miekg/dns; never the
// product module.
package clusterdns

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/charmbracelet/log"
	"github.com/miekg/dns"
)

// DefaultDomain is the cluster domain, the kubelet's default.
const DefaultDomain = "cluster.local"

// Services finds what a Service's name stands for: its cluster IPs, a
// headless Service's endpoint addresses, or an ExternalName's target (cname);
// ok is false when there is no such Service.
type Services interface {
	Lookup(namespace, name string) (addrs []netip.Addr, cname string, ok bool)
}

// Config says where the server listens and what it answers.
type Config struct {
	// Addr is the IP to serve on (port 53), or host:port.
	Addr string
	// Domain is the cluster domain (default DefaultDomain).
	Domain string
	// Services answers the cluster domain's Service names (nil: none).
	Services Services
	// RecordsFile is the hosts-style file of extra names ("": none).
	RecordsFile string
	// Upstream is the resolver for other names, host:port; "" reads the
	// host's /etc/resolv.conf (its first nameserver), "-" forwards nothing.
	Upstream string
	Logger   *log.Logger
}

// Server is a running cluster DNS.
type Server struct {
	// Addr is host:port of both listeners.
	Addr string

	cfg      Config
	domain   string // lower-case FQDN with a trailing dot
	upstream string
	servers  []*dns.Server

	mu      sync.Mutex
	records map[string][]netip.Addr // lower-case FQDN -> addresses
	stamp   fileStamp
}

type fileStamp struct {
	mod  time.Time
	size int64
}

// Start listens on cfg.Addr (UDP and TCP) and serves until Close.
func Start(ctx context.Context, cfg Config) (*Server, error) {
	addr := cfg.Addr
	if _, _, err := net.SplitHostPort(addr); err != nil {
		addr = net.JoinHostPort(addr, "53")
	}
	if cfg.Domain == "" {
		cfg.Domain = DefaultDomain
	}
	if cfg.Logger == nil {
		cfg.Logger = log.New(os.Stderr)
	}
	s := &Server{cfg: cfg, domain: dns.Fqdn(strings.ToLower(cfg.Domain))}
	switch cfg.Upstream {
	case "-":
	case "":
		s.upstream = hostResolver("/etc/resolv.conf")
	default:
		s.upstream = cfg.Upstream
	}
	var lc net.ListenConfig
	tl, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("cluster DNS: %w", err)
	}
	s.Addr = tl.Addr().String()
	if s.upstream == s.Addr {
		s.upstream = "" // never forward to itself
	}
	ul, err := lc.ListenPacket(ctx, "udp", s.Addr)
	if err != nil {
		tl.Close()
		return nil, fmt.Errorf("cluster DNS: %w", err)
	}
	h := dns.HandlerFunc(s.serve)
	s.servers = []*dns.Server{{Listener: tl, Handler: h}, {PacketConn: ul, Handler: h}}
	for _, srv := range s.servers {
		go func() { _ = srv.ActivateAndServe() }()
	}
	return s, nil
}

// Close stops both listeners.
func (s *Server) Close() {
	for _, srv := range s.servers {
		_ = srv.Shutdown()
	}
}

// hostResolver is the first nameserver of a resolv.conf as host:53 ("" if
// none).
func hostResolver(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 2 && fields[0] == "nameserver" {
			if ip, err := netip.ParseAddr(fields[1]); err == nil {
				return netip.AddrPortFrom(ip.WithZone(""), 53).String()
			}
		}
	}
	return ""
}

func (s *Server) serve(w dns.ResponseWriter, req *dns.Msg) {
	if len(req.Question) != 1 {
		m := new(dns.Msg)
		m.SetRcode(req, dns.RcodeFormatError)
		_ = w.WriteMsg(m)
		return
	}
	_ = w.WriteMsg(s.resolve(req, req.Question[0], 0))
}

// resolve answers q: from the records file, the cluster domain, or the
// upstream resolver; a CNAME is followed (up to 8 links).
func (s *Server) resolve(req *dns.Msg, q dns.Question, depth int) *dns.Msg {
	name := strings.ToLower(q.Name)
	if addrs, ok := s.lookupRecords(name); ok {
		return s.answer(req, q, addrs, true)
	}
	if name != s.domain && !strings.HasSuffix(name, "."+s.domain) {
		if depth == 0 {
			return s.forward(req)
		}
		fwd := new(dns.Msg)
		fwd.SetQuestion(q.Name, q.Qtype)
		return s.forward(fwd)
	}
	addrs, cname, found := s.lookupCluster(name)
	if cname == "" || depth >= 8 || q.Qtype == dns.TypeCNAME {
		m := s.answer(req, q, addrs, found)
		if cname != "" {
			m.Answer = append(m.Answer, &dns.CNAME{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeCNAME, Class: dns.ClassINET, Ttl: 5}, Target: dns.Fqdn(cname)})
		}
		return m
	}
	next := s.resolve(req, dns.Question{Name: dns.Fqdn(cname), Qtype: q.Qtype, Qclass: q.Qclass}, depth+1)
	m := new(dns.Msg)
	m.SetReply(req)
	m.Authoritative = true
	m.Rcode = next.Rcode
	m.Answer = append([]dns.RR{&dns.CNAME{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeCNAME, Class: dns.ClassINET, Ttl: 5}, Target: dns.Fqdn(cname)}}, next.Answer...)
	return m
}

// answer is the authoritative reply to q with the addresses of its type;
// NXDOMAIN when the name does not exist, an empty NOERROR when it has no
// address of that type.
func (s *Server) answer(req *dns.Msg, q dns.Question, addrs []netip.Addr, exists bool) *dns.Msg {
	m := new(dns.Msg)
	m.SetReply(req)
	m.Authoritative = true
	if !exists {
		m.Rcode = dns.RcodeNameError
		return m
	}
	for _, a := range addrs {
		hdr := dns.RR_Header{Name: q.Name, Class: dns.ClassINET, Ttl: 5}
		switch {
		case a.Is4() && (q.Qtype == dns.TypeA || q.Qtype == dns.TypeANY):
			hdr.Rrtype = dns.TypeA
			m.Answer = append(m.Answer, &dns.A{Hdr: hdr, A: a.AsSlice()})
		case a.Is6() && (q.Qtype == dns.TypeAAAA || q.Qtype == dns.TypeANY):
			hdr.Rrtype = dns.TypeAAAA
			m.Answer = append(m.Answer, &dns.AAAA{Hdr: hdr, AAAA: a.AsSlice()})
		}
	}
	return m
}

// lookupCluster answers <service>.<namespace>.svc.<domain>; the domain, svc
// and namespace names themselves exist without addresses.
func (s *Server) lookupCluster(name string) (addrs []netip.Addr, cname string, exists bool) {
	rest := strings.TrimSuffix(strings.TrimSuffix(name, s.domain), ".")
	if rest == "" {
		return nil, "", true
	}
	labels := strings.Split(rest, ".")
	n := len(labels)
	if labels[n-1] != "svc" {
		return nil, "", false
	}
	switch n {
	case 1, 2: // svc.<domain>, <namespace>.svc.<domain>
		return nil, "", true
	case 3:
		if s.cfg.Services == nil {
			return nil, "", false
		}
		return s.cfg.Services.Lookup(labels[1], labels[0])
	}
	return nil, "", false
}

// lookupRecords answers from the records file, re-read when it changed.
func (s *Server) lookupRecords(name string) ([]netip.Addr, bool) {
	if s.cfg.RecordsFile == "" {
		return nil, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	st, err := os.Stat(s.cfg.RecordsFile)
	if err != nil {
		s.records, s.stamp = nil, fileStamp{}
		return nil, false
	}
	if stamp := (fileStamp{st.ModTime(), st.Size()}); stamp != s.stamp || s.records == nil {
		recs, err := ReadRecords(s.cfg.RecordsFile)
		if err != nil {
			s.cfg.Logger.Warn("cluster DNS records file", "file", s.cfg.RecordsFile, "err", err)
		}
		s.records, s.stamp = recs, stamp
	}
	addrs, ok := s.records[name]
	return addrs, ok
}

// ReadRecords reads a hosts-style file: "ADDRESS NAME [NAME...]" lines,
// # comments. Names are returned as lower-case FQDNs.
func ReadRecords(path string) (map[string][]netip.Addr, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	recs := map[string][]netip.Addr{}
	sc := bufio.NewScanner(f)
	for line := 1; sc.Scan(); line++ {
		text, _, _ := strings.Cut(sc.Text(), "#")
		fields := strings.Fields(text)
		if len(fields) == 0 {
			continue
		}
		ip, err := netip.ParseAddr(fields[0])
		if err != nil || len(fields) < 2 {
			return recs, fmt.Errorf("line %d: want ADDRESS NAME [NAME...], got %q", line, sc.Text())
		}
		for _, n := range fields[1:] {
			fq := dns.Fqdn(strings.ToLower(n))
			recs[fq] = append(recs[fq], ip.Unmap())
		}
	}
	return recs, sc.Err()
}

// forward sends req to the upstream resolver, as it came; SERVFAIL when
// there is none or it fails.
func (s *Server) forward(req *dns.Msg) *dns.Msg {
	fail := func() *dns.Msg {
		m := new(dns.Msg)
		m.SetRcode(req, dns.RcodeServerFailure)
		return m
	}
	if s.upstream == "" {
		return fail()
	}
	c := &dns.Client{Timeout: 2 * time.Second}
	res, _, err := c.Exchange(req, s.upstream)
	if err == nil && res.Truncated {
		c.Net = "tcp"
		res, _, err = c.Exchange(req, s.upstream)
	}
	if err != nil {
		return fail()
	}
	return res
}
