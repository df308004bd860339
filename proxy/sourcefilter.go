package proxy

import (
	"fmt"
	"net"
	"net/netip"
)

// sourceFilter holds allowedSourceRanges; empty allows everyone.
type sourceFilter struct {
	prefixes []netip.Prefix
}

func newSourceFilter(ranges []string) (*sourceFilter, error) {
	sf := &sourceFilter{}
	for i, r := range ranges {
		p, err := netip.ParsePrefix(r)
		if err != nil {
			return nil, fmt.Errorf("allowedSourceRanges[%d]: bad CIDR %q: %w", i, r, err)
		}
		sf.prefixes = append(sf.prefixes, p.Masked())
	}
	return sf, nil
}

func (sf *sourceFilter) allows(addr net.Addr) bool {
	if len(sf.prefixes) == 0 {
		return true
	}
	ap, err := netip.ParseAddrPort(addr.String())
	if err != nil {
		return false
	}
	for _, p := range sf.prefixes {
		if p.Contains(ap.Addr().Unmap()) {
			return true
		}
	}
	return false
}

// filter wraps a tailnet listener so connections from sources outside the
// current allowedSourceRanges are closed at once.
func (e *Engine) filter(ln net.Listener) net.Listener { return &filteredListener{Listener: ln, e: e} }

type filteredListener struct {
	net.Listener
	e *Engine
}

func (l *filteredListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.e.sources.Load().allows(c.RemoteAddr()) {
			return c, nil
		}
		l.e.log.Debug("connection refused by allowedSourceRanges", "remote", c.RemoteAddr())
		c.Close()
	}
}
