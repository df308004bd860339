package tailnet

import (
	"encoding/json"
	"maps"
	"net/netip"
	"slices"

	"tailscale.com/tailcfg"
	"tailscale.com/types/key"
)

// vipState is what control knows about the hosts of Tailscale Services:
// what each node serves (from its c2n GET /vip-services answer), which
// nodes hold a map poll open (online), and which host each service's
// addresses are routed to. Guarded by Tailnet.routeMu.
type vipState struct {
	reported map[key.NodePublic]reported
	online   map[key.NodePublic]int // open map polls
	// polls counts the map polls each node ever opened: an answer given
	// before the node's latest poll began may come from a process that
	// is gone, so control asks again (see vipfetch.go).
	polls   map[key.NodePublic]uint64
	primary map[string]key.NodePublic
	// fetchers are the running fetchServices loops, one per node at most
	// (so an older answer never lands after a newer one), each woken
	// through its channel when the node's hash or map poll changes.
	fetchers map[key.NodePublic]chan struct{}
}

func newVIPState() vipState {
	return vipState{
		reported: map[key.NodePublic]reported{}, online: map[key.NodePublic]int{},
		polls: map[key.NodePublic]uint64{}, primary: map[string]key.NodePublic{},
		fetchers: map[key.NodePublic]chan struct{}{},
	}
}

// reported is one node's answer to c2n GET /vip-services.
type reported struct {
	hash string
	// poll is the node's map poll (vipState.polls) the answer was asked
	// on, and disco the node's disco key then: a new disco key means a
	// new process of the node.
	poll     uint64
	disco    key.DiscoPublic
	services []*tailcfg.VIPService
}

func (r reported) find(name string) *tailcfg.VIPService {
	for _, s := range r.services {
		if string(s.Name) == name {
			return s
		}
	}
	return nil
}

// hostedLocked returns the services node n is an approved host of: the
// service exists, n reports it (active or not: a node that serves it but
// does not advertise it yet gets its addresses and certificate name, as
// on Tailscale) and the policy lets n host it.
func (t *Tailnet) hostedLocked(n *tailcfg.Node, services []*vipService) []*vipService {
	rep := t.routes.vip.reported[n.Key]
	var out []*vipService
	for _, s := range services {
		if rep.find(s.Name) != nil && t.routes.policy.serviceApproved(s.Name, s.Tags, n.Tags) {
			out = append(out, s)
		}
	}
	return out
}

// choosePrimariesLocked picks, for every service, the host its addresses
// are routed to: an approved host that is online and advertises the
// service (Active). The chosen host keeps it while it qualifies; else the
// qualifying host with the lowest node ID takes over. It reports whether
// any choice changed.
func (t *Tailnet) choosePrimariesLocked(nodes []*tailcfg.Node, services []*vipService) bool {
	v := &t.routes.vip
	next := map[string]key.NodePublic{}
	for _, s := range services {
		var best *tailcfg.Node
		for _, n := range nodes {
			vs := v.reported[n.Key].find(s.Name)
			if v.online[n.Key] == 0 || vs == nil || !vs.Active || !t.routes.policy.serviceApproved(s.Name, s.Tags, n.Tags) {
				continue
			}
			if n.Key == v.primary[s.Name] {
				best = n
				break
			}
			if best == nil || n.ID < best.ID {
				best = n
			}
		}
		if best != nil {
			next[s.Name] = best.Key
		}
	}
	changed := !maps.Equal(next, v.primary)
	for name, k := range next {
		if v.primary[name] != k {
			for _, n := range nodes {
				if n.Key == k {
					t.logger.Info("Tailscale Service routed to a new host", "service", name, "host", n.Name)
				}
			}
		}
	}
	for name := range v.primary {
		if _, ok := next[name]; !ok {
			t.logger.Info("Tailscale Service has no host to route to", "service", name)
		}
	}
	v.primary = next
	return changed
}

// serviceRoutesLocked are the addresses of the services routed to k.
func (t *Tailnet) serviceRoutesLocked(k key.NodePublic, services []*vipService) []netip.Prefix {
	var out []netip.Prefix
	for _, s := range services {
		if t.routes.vip.primary[s.Name] == k {
			for _, a := range s.addrs() {
				out = append(out, netip.PrefixFrom(a, a.BitLen()))
			}
		}
	}
	return out
}

// withServiceHost adds the service-host capability for hosted to caps:
// one ServiceIPMappings value naming every hosted service's addresses
// (clients read exactly one). A copy is returned.
func withServiceHost(caps tailcfg.NodeCapMap, hosted []*vipService) tailcfg.NodeCapMap {
	if len(hosted) == 0 {
		return caps
	}
	m := tailcfg.ServiceIPMappings{}
	for _, s := range hosted {
		m[tailcfg.ServiceName(s.Name)] = s.addrs()
	}
	raw, err := json.Marshal(m)
	if err != nil {
		return caps
	}
	out := maps.Clone(caps)
	if out == nil {
		out = tailcfg.NodeCapMap{}
	}
	out[tailcfg.NodeAttrServiceHost] = []tailcfg.RawMessage{tailcfg.RawMessage(raw)}
	return out
}

// servicesChanged brings hosts, routes and every node's DNS in line with
// the services after one was created, changed or deleted.
func (t *Tailnet) servicesChanged() {
	t.syncAll()
	t.wakeAll()
}

// wakeAll makes testcontrol send every node a new map (which serveMap
// rewrites with the services' DNS records): AddDNSRecords with no record
// changes nothing else.
func (t *Tailnet) wakeAll() { t.Control.AddDNSRecords() }

// serviceDNS returns the DNS records of all services (every node resolves
// <label>.<MagicDNS domain> to the service's addresses) and, for node k,
// the names of the services it hosts, for which it may get certificates.
func (t *Tailnet) serviceDNS(k key.NodePublic) (records []tailcfg.DNSRecord, certDomains []string) {
	for _, s := range t.store.services() {
		fqdn := s.label() + "." + t.MagicDNSDomain
		// Records without a Type are the ones clients' dialers read, one
		// address per name, the last one winning: IPv4 goes last.
		addrs := s.addrs()
		slices.SortFunc(addrs, func(a, b netip.Addr) int { return b.BitLen() - a.BitLen() })
		for _, a := range addrs {
			records = append(records, tailcfg.DNSRecord{Name: fqdn, Value: a.String()})
		}
	}
	t.routeMu.Lock()
	certDomains = slices.Clone(t.routes.served[k].certDomains)
	t.routeMu.Unlock()
	return records, certDomains
}
