package tailnet

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"tailscale.com/net/netaddr"
	"tailscale.com/net/tsaddr"
	"tailscale.com/tailcfg"
)

// vipService is one Tailscale Service (a VIP service) as the API shows it
// (tailscale.com/client/tailscale/v2's Service) and the state file keeps it.
type vipService struct {
	Name        string            `json:"name"`
	DisplayName string            `json:"displayName,omitempty"`
	Addrs       []string          `json:"addrs"`
	Comment     string            `json:"comment"`
	Annotations map[string]string `json:"annotations,omitempty"`
	Ports       []string          `json:"ports"`
	Tags        []string          `json:"tags"`
}

func (s *vipService) clone() *vipService {
	c := *s
	c.Addrs, c.Ports, c.Tags = slices.Clone(s.Addrs), slices.Clone(s.Ports), slices.Clone(s.Tags)
	c.Annotations = maps.Clone(s.Annotations)
	return &c
}

// addrs are the service's addresses, parsed (the API only stores valid
// ones).
func (s *vipService) addrs() []netip.Addr {
	var out []netip.Addr
	for _, a := range s.Addrs {
		if ip, err := netip.ParseAddr(a); err == nil {
			out = append(out, ip)
		}
	}
	return out
}

// label is the service's DNS label: its name without "svc:".
func (s *vipService) label() string { return tailcfg.ServiceName(s.Name).WithoutPrefix() }

// VIPRange is where devcluster gives Tailscale Services their IPv4
// addresses (their IPv6 ones are the Tailscale 4-to-6 form of those):
// 100.100.0.0/16. Nodes never get addresses there: testcontrol numbers
// them 100.64.<id/256>.<id%256>, always inside 100.64.0.0/16.
// 100.100.100.0/24 is left out for Tailscale's own 100.100.100.100.
func VIPRange() netip.Prefix { return netip.PrefixFrom(netaddr.IPv4(100, 100, 0, 0), 16) }

// validVIP4 reports whether a may be a service's IPv4 address.
func validVIP4(a netip.Addr) bool {
	b := a.As4()
	return a.Is4() && VIPRange().Contains(a) && b[2] != 100 && b[3] != 0 && b[3] != 255
}

// validVIP6 reports whether a may be a service's IPv6 address: the 4-to-6
// form of a valid IPv4 one.
func validVIP6(a netip.Addr) bool {
	v4, ok := tsaddr.Tailscale6to4(a)
	return ok && validVIP4(v4)
}

// service returns a copy of the service name.
func (s *store) service(name string) (*vipService, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.Services[name]
	if !ok {
		return nil, false
	}
	return v.clone(), true
}

// services returns copies of all services, by name.
func (s *store) services() []*vipService {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*vipService, 0, len(s.Services))
	for _, v := range s.Services {
		out = append(out, v.clone())
	}
	slices.SortFunc(out, func(a, b *vipService) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// putService creates or replaces svc. Addresses it does not bring are
// kept from the service it replaces, else allocated; addresses it brings
// must be free. It returns what was stored.
func (s *store) putService(svc *vipService) (*vipService, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	used := map[netip.Addr]bool{}
	for name, o := range s.Services {
		if name != svc.Name {
			for _, a := range o.addrs() {
				used[a] = true
			}
		}
	}
	var v4, v6 netip.Addr
	want := svc.Addrs
	if old, ok := s.Services[svc.Name]; ok && len(want) == 0 {
		want = old.Addrs
	}
	for _, a := range want {
		ip, err := netip.ParseAddr(a)
		switch {
		case err != nil:
			return nil, fmt.Errorf("addrs: %q is not an IP address", a)
		case ip.Is4() && !validVIP4(ip):
			return nil, fmt.Errorf("addrs: %s is outside devcluster's service range %s (100.100.100.0/24 and .0/.255 excluded)", ip, VIPRange())
		case ip.Is6() && !validVIP6(ip):
			return nil, fmt.Errorf("addrs: %s is not the 4-to-6 form of an address in devcluster's service range %s", ip, VIPRange())
		case used[ip]:
			return nil, fmt.Errorf("addrs: %s belongs to another service", ip)
		case ip.Is4() && v4.IsValid(), ip.Is6() && v6.IsValid():
			return nil, errors.New("addrs: at most one IPv4 and one IPv6 address")
		case ip.Is4():
			v4 = ip
		default:
			v6 = ip
		}
	}
	if !v4.IsValid() {
		for i := 1; i < 1<<16; i++ {
			ip := netaddr.IPv4(100, 100, uint8(i>>8), uint8(i))
			if validVIP4(ip) && !used[ip] && !used[tsaddr.Tailscale4To6(ip)] && tsaddr.Tailscale4To6(ip) != v6 {
				v4 = ip
				break
			}
		}
		if !v4.IsValid() {
			return nil, fmt.Errorf("no free address left in %s", VIPRange())
		}
	}
	if !v6.IsValid() {
		v6 = tsaddr.Tailscale4To6(v4)
		if used[v6] {
			return nil, fmt.Errorf("addrs: %s (the 4-to-6 form of %s) belongs to another service", v6, v4)
		}
	}
	stored := svc.clone()
	stored.Addrs = []string{v4.String(), v6.String()}
	if s.Services == nil {
		s.Services = map[string]*vipService{}
	}
	s.Services[svc.Name] = stored
	return stored.clone(), s.saveLocked()
}

// deleteService removes the service name, reporting whether it existed.
func (s *store) deleteService(name string) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.Services[name]; !ok {
		return false, nil
	}
	delete(s.Services, name)
	return true, s.saveLocked()
}

// checkServiceName accepts svc:<DNS label>, lower case.
func checkServiceName(name string) error {
	if err := tailcfg.ServiceName(name).Validate(); err != nil {
		return err
	}
	if l := strings.TrimPrefix(name, "svc:"); l != strings.ToLower(l) {
		return fmt.Errorf("%q is not a valid service name: must be lower case", name)
	}
	return nil
}

// checkServicePorts accepts what the API accepts: "tcp:<port>",
// "udp:<port>", "tcp:<first>-<last>" (ports 1-65535), or
// "do-not-validate" alone.
func checkServicePorts(ports []string) error {
	if len(ports) == 0 {
		return errors.New(`ports: at least one is required ("tcp:443", "udp:53", "tcp:8000-8099" or "do-not-validate")`)
	}
	for _, p := range ports {
		if p == "do-not-validate" {
			if len(ports) > 1 {
				return errors.New(`ports: "do-not-validate" cannot be combined with other ports`)
			}
			continue
		}
		proto, rng, ok := strings.Cut(p, ":")
		if !ok || (proto != "tcp" && proto != "udp") {
			return fmt.Errorf(`ports: %q must be "tcp:<port>", "udp:<port>", a range like "tcp:8000-8099", or "do-not-validate"`, p)
		}
		lo, hi, isRange := strings.Cut(rng, "-")
		if !isRange {
			hi = lo
		}
		first, err1 := strconv.ParseUint(lo, 10, 16)
		last, err2 := strconv.ParseUint(hi, 10, 16)
		if err1 != nil || err2 != nil || first == 0 || last < first {
			return fmt.Errorf("ports: %q: ports must be 1-65535, and a range's first port not above its last", p)
		}
	}
	return nil
}

// serviceName returns the {name} path value, checked.
func serviceName(w http.ResponseWriter, r *http.Request) (string, bool) {
	name := r.PathValue("name")
	if err := checkServiceName(name); err != nil {
		apiError(w, http.StatusBadRequest, "invalid service name: "+err.Error())
		return "", false
	}
	return name, true
}

// serveListServices is GET /api/v2/tailnet/{tailnet}/vip-services.
func (t *Tailnet) serveListServices(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, map[string][]*vipService{"vipServices": t.store.services()})
}

// serveGetService is GET /api/v2/tailnet/{tailnet}/vip-services/{name}.
func (t *Tailnet) serveGetService(w http.ResponseWriter, r *http.Request) {
	name, ok := serviceName(w, r)
	if !ok {
		return
	}
	svc, ok := t.store.service(name)
	if !ok {
		apiError(w, http.StatusNotFound, fmt.Sprintf("service %q not found", name))
		return
	}
	writeJSON(w, svc)
}

// servePutService is PUT /api/v2/tailnet/{tailnet}/vip-services/{name}:
// create or update. Without addrs a new service gets a free IPv4 in
// VIPRange and its 4-to-6 IPv6, and an existing one keeps its addresses.
func (t *Tailnet) servePutService(w http.ResponseWriter, r *http.Request) {
	name, ok := serviceName(w, r)
	if !ok {
		return
	}
	var svc vipService
	if err := json.NewDecoder(r.Body).Decode(&svc); err != nil {
		apiError(w, http.StatusBadRequest, "bad request body: "+err.Error())
		return
	}
	if svc.Name == "" {
		svc.Name = name
	}
	if svc.Name != name {
		apiError(w, http.StatusBadRequest, fmt.Sprintf("name %q in the body does not match %q in the path", svc.Name, name))
		return
	}
	if err := checkServicePorts(svc.Ports); err != nil {
		apiError(w, http.StatusBadRequest, err.Error())
		return
	}
	for _, tag := range svc.Tags {
		if err := tailcfg.CheckTag(tag); err != nil {
			apiError(w, http.StatusBadRequest, fmt.Sprintf("tags: %q: %v", tag, err))
			return
		}
	}
	if svc.Tags == nil {
		svc.Tags = []string{}
	}
	stored, err := t.store.putService(&svc)
	if err != nil {
		apiError(w, http.StatusBadRequest, err.Error())
		return
	}
	t.logger.Info("Tailscale Service saved through the API", "service", stored.Name, "addrs", stored.Addrs, "ports", stored.Ports)
	t.servicesChanged()
	writeJSON(w, stored)
}

// serveDeleteService is DELETE /api/v2/tailnet/{tailnet}/vip-services/{name}.
func (t *Tailnet) serveDeleteService(w http.ResponseWriter, r *http.Request) {
	name, ok := serviceName(w, r)
	if !ok {
		return
	}
	found, err := t.store.deleteService(name)
	switch {
	case err != nil:
		apiError(w, http.StatusInternalServerError, err.Error())
		return
	case !found:
		apiError(w, http.StatusNotFound, fmt.Sprintf("service %q not found", name))
		return
	}
	t.logger.Info("Tailscale Service deleted through the API", "service", name)
	t.servicesChanged()
	w.WriteHeader(http.StatusOK)
}
