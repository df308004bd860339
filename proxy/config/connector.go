package config

import (
	"fmt"
	"net/netip"
)

// Connector is the connector section: the node routes tailnet traffic into
// the networks it can reach, as a Connector's replica does. At least one of
// Routes, ExitNode and AppConnector is set; AppConnector excludes ExitNode.
type Connector struct {
	// Routes are subnets the node advertises and forwards tailnet traffic
	// to (subnet router), each a masked prefix ("10.40.0.0/14"). For an
	// app connector they are its pre-configured routes.
	Routes []string `json:"routes,omitempty"`
	// ExitNode advertises 0.0.0.0/0 and ::/0: tailnet clients may send all
	// their traffic through the node.
	ExitNode bool `json:"exitNode,omitempty"`
	// AppConnector makes the node an app connector: it resolves the
	// domains the tailnet policy gives it and advertises routes to what
	// they resolve to.
	AppConnector bool `json:"appConnector,omitempty"`
}

// tailnetRanges are the tailnet's own addresses; a route must not cover
// them, or clients would send tailnet traffic through the node.
var tailnetRanges = []netip.Prefix{netip.MustParsePrefix("100.64.0.0/10"), netip.MustParsePrefix("fd7a:115c:a1e0::/48")}

func (c *Connector) validate(add addFunc) {
	if len(c.Routes) == 0 && !c.ExitNode && !c.AppConnector {
		add("connector", "needs routes, exitNode or appConnector")
	}
	if c.AppConnector && c.ExitNode {
		add("connector", "appConnector and exitNode are exclusive")
	}
	var seen []netip.Prefix
	for i, r := range c.Routes {
		field := fmt.Sprintf("connector.routes[%d]", i)
		p, err := netip.ParsePrefix(r)
		if err != nil {
			add(field, "%q is not a CIDR: %v", r, err)
			continue
		}
		if p.Masked() != p {
			add(field, "%q is not a masked prefix (did you mean %s?)", r, p.Masked())
			continue
		}
		if p.Bits() == 0 {
			add(field, "%q routes everything; set exitNode instead", r)
		}
		for _, t := range tailnetRanges {
			if p.Overlaps(t) {
				add(field, "%q overlaps the tailnet's own addresses %s", r, t)
			}
		}
		for _, s := range seen {
			if p.Overlaps(s) {
				add(field, "%q overlaps %s", r, s)
			}
		}
		seen = append(seen, p)
	}
}
