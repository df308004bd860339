package echobasic

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"strings"

	"github.com/charmbracelet/log"
	"github.com/miekg/dns"
)

// whoamiZones reads the zones of a Corefile's server blocks that use the
// whoami plugin ("foo.bar.com:53 {" ... "whoami" ... "}"). It is no Corefile
// parser: it knows the shape of the base manifests' one, and nothing else
// of it is served (forward in particular: the stand-in never forwards).
func whoamiZones(corefile string) ([]string, error) {
	f, err := os.Open(corefile)
	if err != nil {
		return nil, fmt.Errorf("corefile: %w", err)
	}
	defer f.Close()
	var zones, block []string
	lines := bufio.NewScanner(f)
	for lines.Scan() {
		line := strings.TrimSpace(lines.Text())
		switch {
		case strings.HasSuffix(line, "{"):
			block = nil
			for _, key := range strings.Fields(strings.TrimSuffix(line, "{")) {
				host, _, _ := strings.Cut(strings.TrimPrefix(key, "dns://"), ":")
				block = append(block, dns.Fqdn(host))
			}
		case line == "whoami":
			zones = append(zones, block...)
		}
	}
	if err := lines.Err(); err != nil {
		return nil, fmt.Errorf("corefile %s: %w", corefile, err)
	}
	return zones, nil
}

// dnsHandler answers names under its zones as CoreDNS's whoami does (the
// client's address as A or AAAA, its port in an SRV record of the
// additional section) and refuses every other name.
type dnsHandler struct {
	zones  []string
	logger *log.Logger
}

// ServeDNS answers one query.
func (h dnsHandler) ServeDNS(w dns.ResponseWriter, req *dns.Msg) {
	m := new(dns.Msg)
	m.SetReply(req)
	m.Authoritative = true
	if len(req.Question) != 1 || !h.served(req.Question[0].Name) {
		m.Rcode = dns.RcodeRefused
		_ = w.WriteMsg(m)
		return
	}
	q := req.Question[0]
	var ip net.IP
	var port int
	var proto string
	switch a := w.RemoteAddr().(type) {
	case *net.UDPAddr:
		ip, port, proto = a.IP, a.Port, "udp"
	case *net.TCPAddr:
		ip, port, proto = a.IP, a.Port, "tcp"
	}
	hdr := dns.RR_Header{Name: q.Name, Class: dns.ClassINET}
	if v4 := ip.To4(); v4 != nil {
		hdr.Rrtype = dns.TypeA
		m.Extra = append(m.Extra, &dns.A{Hdr: hdr, A: v4})
	} else {
		hdr.Rrtype = dns.TypeAAAA
		m.Extra = append(m.Extra, &dns.AAAA{Hdr: hdr, AAAA: ip})
	}
	srv := dns.RR_Header{Name: "_" + proto + "." + q.Name, Rrtype: dns.TypeSRV, Class: dns.ClassINET}
	m.Extra = append(m.Extra, &dns.SRV{Hdr: srv, Port: uint16(port), Target: "."})
	h.logger.Debug("whoami", "name", q.Name, "from", w.RemoteAddr())
	_ = w.WriteMsg(m)
}

func (h dnsHandler) served(name string) bool {
	for _, z := range h.zones {
		if dns.IsSubDomain(z, dns.Fqdn(name)) {
			return true
		}
	}
	return false
}

func startDNS(ctx context.Context, c Config, s *Servers, logger *log.Logger) error {
	zones, err := whoamiZones(c.Corefile)
	if err != nil {
		return err
	}
	h := dnsHandler{zones: zones, logger: logger}
	addr := net.JoinHostPort(c.Host, c.DNSPort)
	pc, err := (&net.ListenConfig{}).ListenPacket(ctx, "udp", addr)
	if err != nil {
		return fmt.Errorf("dns: %w", err)
	}
	l, err := s.listen(ctx, "dns-tcp", c.Host, c.DNSPort)
	if err != nil {
		_ = pc.Close()
		return err
	}
	s.Addrs["dns"] = pc.LocalAddr().String()
	udp := &dns.Server{PacketConn: pc, Handler: h}
	tcp := &dns.Server{Listener: l, Handler: h}
	s.stops = append(s.stops, func() { _ = udp.Shutdown(); _ = tcp.Shutdown() })
	s.serve("dns", udp.ActivateAndServe)
	s.serve("dns-tcp", tcp.ActivateAndServe)
	return nil
}
