package gatewaytable

import (
	"math/rand/v2"
	"sort"

	"github.com/tailplane/tailplane/proxy/config"
)

// Split picks one of a rule's backends by weight. It is immutable.
type Split struct {
	backends []config.WeightedBackend // those with a weight above zero
	cum      []int64                  // running sum of their weights
}

// NewSplit builds the split of bs; backends of weight zero never receive
// anything.
func NewSplit(bs []config.WeightedBackend) *Split {
	s := &Split{}
	var total int64
	for _, b := range bs {
		if b.Weight <= 0 {
			continue
		}
		total += int64(b.Weight)
		s.backends = append(s.backends, b)
		s.cum = append(s.cum, total)
	}
	return s
}

// Pick returns a backend with probability weight/total. ok is false when no
// backend has a weight, which the Gateway API answers with 500. The backend
// may be Invalid: its share of requests is answered 500 too.
func (s *Split) Pick() (b config.WeightedBackend, ok bool) {
	if len(s.cum) == 0 {
		return b, false
	}
	return s.at(rand.Int64N(s.cum[len(s.cum)-1])), true
}

// at returns the backend whose share holds n (0 <= n < total).
func (s *Split) at(n int64) config.WeightedBackend {
	i := sort.Search(len(s.cum), func(i int) bool { return s.cum[i] > n })
	return s.backends[i]
}

// SNITable chooses the backend of a TLS passthrough connection by the
// ClientHello's server name, with the hostname precedence of Hosts.
type SNITable struct {
	hosts Hosts[*tlsEntry]
}

type tlsEntry struct {
	name  string
	split *Split
}

// NewSNITable builds the table of the TLS routes of the listeners sharing
// one port. A route without hostnames takes its listener's hostname.
func NewSNITable(listeners []config.Listener) *SNITable {
	t := &SNITable{}
	for _, l := range listeners {
		for _, r := range l.TLSRoutes {
			e := &tlsEntry{name: r.Name, split: NewSplit(r.Backends)}
			for _, h := range hostnamesOf(r.Hostnames, l.Hostname) {
				t.hosts.Add(h, e)
			}
		}
	}
	return t
}

// Pick returns the route name and backend for serverName. ok is false when
// no route takes the name or its backend is missing or invalid: the
// connection is then closed.
func (t *SNITable) Pick(serverName string) (route string, b config.WeightedBackend, ok bool) {
	e, found := t.hosts.First(serverName)
	if !found {
		return "", b, false
	}
	b, ok = e.split.Pick()
	return e.name, b, ok && !b.Invalid
}

// hostnamesOf is an entry's hostnames: its own, or its listener's when it
// has none (the operator intersects them, but an entry must never answer
// for more than its listener), or any host ("") when neither has one.
func hostnamesOf(own []string, listener string) []string {
	if len(own) > 0 {
		return own
	}
	return []string{listener}
}
