package tailnet

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"tailscale.com/tailcfg"
	"tailscale.com/types/appctype"
	"tailscale.com/types/dnstype"
	"tailscale.com/types/key"
)

// appConnectorsCap is the node attribute that makes a node an app
// connector and lists its apps (appctype.AppConnectorAttr values).
const appConnectorsCap tailcfg.NodeCapability = "tailscale.com/app-connectors"

// appDNS is one app connector's part of the tailnet's DNS: the domains it
// serves, and where its peers send their queries for them.
type appDNS struct {
	node    key.NodePublic
	domains []string // split-DNS suffixes ("*.example.com" is example.com)
	doh     string   // http://<its IPv4>:<its peerapi port>/dns-query
}

// appConnectorDNS lists the online app connectors (nodes that advertise
// the app connector and have the policy's tailscale.com/app-connectors
// attribute) with the domains of their apps, as Tailscale's control plane
// derives them: every other node resolves those domains through the
// connector's peer API (DNS over HTTP over the tailnet), which is how the
// connector sees the answers and learns the routes to advertise.
func (t *Tailnet) appConnectorDNS() []appDNS {
	var out []appDNS
	for _, n := range t.liveNodes() {
		if !n.Hostinfo.Valid() || !n.Hostinfo.AppConnector().EqualBool(true) || len(n.Addresses) == 0 {
			continue
		}
		t.routeMu.Lock()
		online := t.routes.vip.online[n.Key] > 0
		caps := t.routes.policy.capMap(n.Tags, "")
		t.routeMu.Unlock()
		port := uint16(0)
		for _, s := range n.Hostinfo.Services().All() {
			if s.Proto == tailcfg.PeerAPI4 {
				port = s.Port
			}
		}
		if !online || port == 0 {
			continue
		}
		attrs, err := tailcfg.UnmarshalNodeCapJSON[appctype.AppConnectorAttr](caps, appConnectorsCap)
		if err != nil {
			t.logger.Warn("tailnet policy: unreadable app connector attribute", "err", err)
			continue
		}
		var domains []string
		for _, a := range attrs {
			for _, d := range a.Domains {
				d = strings.TrimPrefix(strings.ToLower(d), "*.")
				if d != "" && !slices.Contains(domains, d) {
					domains = append(domains, d)
				}
			}
		}
		v4 := netip.Prefix{}
		for _, a := range n.Addresses {
			if a.Addr().Is4() {
				v4 = a
			}
		}
		if len(domains) == 0 || !v4.IsValid() {
			continue
		}
		slices.Sort(domains)
		out = append(out, appDNS{node: n.Key, domains: domains, doh: fmt.Sprintf("http://%s:%d/dns-query", v4.Addr(), port)})
	}
	return out
}

// appDNSRoutes adds the app connectors' split-DNS routes to a node's DNS
// config: every other node resolves an app's domains through the
// connector's peer API. (The connector answers those queries with its
// host's resolver, /etc/resolv.conf, whatever its tailnet DNS says.)
func (t *Tailnet) appDNSRoutes(self key.NodePublic, dns *tailcfg.DNSConfig) {
	for _, a := range t.appConnectorDNS() {
		if a.node == self {
			continue
		}
		for _, d := range a.domains {
			if dns.Routes == nil {
				dns.Routes = map[string][]*dnstype.Resolver{}
			}
			dns.Routes[d] = append(dns.Routes[d], &dnstype.Resolver{Addr: a.doh})
		}
	}
}

// appDNSChanged sends every node a new map when the app connectors' DNS
// changed (a connector came, went, or its apps changed).
func (t *Tailnet) appDNSChanged() {
	sig := fmt.Sprint(t.appConnectorDNS())
	t.routeMu.Lock()
	changed := sig != t.appDNSSig
	t.appDNSSig = sig
	t.routeMu.Unlock()
	if changed {
		t.wakeAll()
	}
}
