package acme

import (
	"context"
	"net"
	"strings"
	"sync"

	"github.com/miekg/dns"
)

// DNS answers TXT queries from records set with Set, over TCP (what Pebble's
// validator uses) and UDP. Every other question gets an empty answer.
type DNS struct {
	// Addr is host:port of both listeners.
	Addr string

	mu      sync.Mutex
	records map[string][]string // lower-case FQDN with trailing dot -> values
	servers []*dns.Server
}

// StartDNS listens on 127.0.0.1 (a free port, or addr if not empty).
func StartDNS(ctx context.Context, addr string) (*DNS, error) {
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	d := &DNS{records: map[string][]string{}}
	var lc net.ListenConfig
	tl, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	d.Addr = tl.Addr().String()
	ul, err := lc.ListenPacket(ctx, "udp", d.Addr)
	if err != nil {
		tl.Close()
		return nil, err
	}
	h := dns.HandlerFunc(d.serve)
	d.servers = []*dns.Server{{Listener: tl, Handler: h}, {PacketConn: ul, Handler: h}}
	for _, s := range d.servers {
		go func() { _ = s.ActivateAndServe() }()
	}
	return d, nil
}

// Set replaces the TXT values of name (with or without trailing dot).
func (d *DNS) Set(name string, values ...string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.records[dns.Fqdn(strings.ToLower(name))] = values
}

// Close stops both listeners.
func (d *DNS) Close() {
	for _, s := range d.servers {
		_ = s.Shutdown()
	}
}

func (d *DNS) serve(w dns.ResponseWriter, req *dns.Msg) {
	m := new(dns.Msg)
	m.SetReply(req)
	m.Authoritative = true
	d.mu.Lock()
	for _, q := range req.Question {
		if q.Qtype != dns.TypeTXT {
			continue
		}
		for _, v := range d.records[strings.ToLower(q.Name)] {
			m.Answer = append(m.Answer, &dns.TXT{
				Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeTXT, Class: dns.ClassINET, Ttl: 0},
				Txt: []string{v},
			})
		}
	}
	d.mu.Unlock()
	_ = w.WriteMsg(m)
}
