package tailnet

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/netip"
	"slices"
	"time"

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
	primary  map[string]key.NodePublic
	fetching map[key.NodePublic]string // ServicesHash being fetched
}

// reported is one node's answer to c2n GET /vip-services.
type reported struct {
	hash     string
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

// streamStarted and streamEnded count a node's open map polls: a node is
// online while it has one, and only online hosts are routed to.
func (t *Tailnet) streamStarted(k key.NodePublic) {
	t.routeMu.Lock()
	t.routes.vip.online[k]++
	first := t.routes.vip.online[k] == 1
	t.routeMu.Unlock()
	if first {
		t.syncAll()
		if n := t.Control.Node(k); n != nil {
			t.maybeFetchServices(n)
		}
	}
}

func (t *Tailnet) streamEnded(k key.NodePublic) {
	t.routeMu.Lock()
	t.routes.vip.online[k]--
	last := t.routes.vip.online[k] <= 0
	if last {
		delete(t.routes.vip.online, k)
	}
	t.routeMu.Unlock()
	if last {
		t.syncAll()
	}
}

// maybeFetchServices asks node n what it serves when its Hostinfo's
// ServicesHash differs from what it last answered, as Tailscale's
// control server does: the hash changes whenever the node's advertised
// services or serve config do.
func (t *Tailnet) maybeFetchServices(n *tailcfg.Node) {
	hash := ""
	if n.Hostinfo.Valid() {
		hash = n.Hostinfo.ServicesHash()
	}
	t.routeMu.Lock()
	v := &t.routes.vip
	known := v.reported[n.Key].hash == hash
	if hash == "" && !known {
		v.reported[n.Key] = reported{}
	}
	start := hash != "" && !known && v.fetching[n.Key] != hash && v.online[n.Key] > 0
	if start {
		v.fetching[n.Key] = hash
	}
	t.routeMu.Unlock()
	switch {
	case hash == "" && !known:
		t.logger.Info("device serves no Tailscale Service", "device", n.Name)
		t.syncAll()
	case start:
		go t.fetchServices(t.ctx, n.Key, hash)
	}
}

// fetchServices asks node k (c2n GET /vip-services) until it answers for
// hash, its hash moves on, or it goes offline.
func (t *Tailnet) fetchServices(ctx context.Context, k key.NodePublic, hash string) {
	defer func() {
		t.routeMu.Lock()
		if t.routes.vip.fetching[k] == hash {
			delete(t.routes.vip.fetching, k)
		}
		t.routeMu.Unlock()
	}()
	for ctx.Err() == nil {
		t.routeMu.Lock()
		online := t.routes.vip.online[k] > 0
		t.routeMu.Unlock()
		n := t.Control.Node(k)
		if !online || n == nil || !n.Hostinfo.Valid() || n.Hostinfo.ServicesHash() != hash || t.devices.removed(k) {
			return
		}
		res, err := t.askServices(ctx, k)
		if err == nil && res.ServicesHash == hash {
			t.routeMu.Lock()
			t.routes.vip.reported[k] = reported{hash: hash, services: res.VIPServices}
			t.routeMu.Unlock()
			var names []string
			for _, s := range res.VIPServices {
				names = append(names, fmt.Sprintf("%s(active=%v)", s.Name, s.Active))
			}
			t.logger.Info("device serves Tailscale Services", "device", n.Name, "services", names)
			t.syncAll()
			return
		}
		t.logger.Debug("c2n GET /vip-services: no current answer yet", "device", n.Name, "err", err)
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// askServices sends c2n GET /vip-services to node k and waits (up to 5 s)
// for its answer. The answer's body is read in testcontrol's callback,
// before the node's request that carries it ends.
func (t *Tailnet) askServices(ctx context.Context, k key.NodePublic) (*tailcfg.C2NVIPServicesResponse, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://node/vip-services", nil)
	if err != nil {
		return nil, err
	}
	type answer struct {
		code int
		body []byte
	}
	ans := make(chan answer, 1)
	err = t.Control.SendC2N(k, req, func(r *http.Response) {
		b, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		select {
		case ans <- answer{r.StatusCode, b}:
		default:
		}
	})
	if err != nil {
		return nil, fmt.Errorf("c2n GET /vip-services: %w", err)
	}
	wait, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	select {
	case <-wait.Done():
		return nil, fmt.Errorf("c2n GET /vip-services: %w", wait.Err())
	case a := <-ans:
		if a.code != http.StatusOK {
			return nil, fmt.Errorf("c2n GET /vip-services: %d %s", a.code, a.body)
		}
		var res tailcfg.C2NVIPServicesResponse
		if err := json.Unmarshal(a.body, &res); err != nil {
			return nil, fmt.Errorf("c2n GET /vip-services answer: %w", err)
		}
		return &res, nil
	}
}
