package tailnet

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"slices"
	"strings"

	"github.com/tailscale/hujson"
	"tailscale.com/tailcfg"
	"tailscale.com/types/key"
)

// served is what control was last told about one node: the routes it
// routes (approved and advertised subnets, and the addresses of the
// Tailscale Services routed to it), its capability map, and the names of
// the services it hosts (certificate names).
type served struct {
	routes      []netip.Prefix
	caps        string // the capability map as JSON, to compare
	certDomains []string
}

// routeState is the tailnet policy and what it last gave each node.
// testcontrol routes a node's subnets only through SetSubnetRoutes and
// sends only the capability map SetNodeCapMap gave it, so devcluster
// decides both here, as Tailscale's control plane does from its policy
// and the admin's route approvals.
type routeState struct {
	policy *policy
	served map[key.NodePublic]served
	vip    vipState
}

// setPolicy installs p and saves it as the tailnet's policy.
func (t *Tailnet) setPolicy(p *policy) error {
	t.routeMu.Lock()
	t.routes.policy = p
	t.routeMu.Unlock()
	return t.store.setPolicy(p.text)
}

// advertisedRoutes are the routes the node's last Hostinfo advertises
// (exit routes included).
func advertisedRoutes(n *tailcfg.Node) []netip.Prefix {
	if !n.Hostinfo.Valid() {
		return nil
	}
	return n.Hostinfo.RoutableIPs().AsSlice()
}

// syncNode brings one node's approvals, served routes and capabilities in
// line with its advertised routes, tags and the policy: routes an
// auto-approver covers become approved (approvals stay when the policy
// changes later, as on Tailscale); the node routes what is both approved
// and advertised, plus the addresses of the Tailscale Services routed to
// it; its capabilities are the policy's nodeAttrs for it plus
// service-host for the services it is an approved host of. Control is
// told only about changes, since each one wakes every node.
func (t *Tailnet) syncNode(n *tailcfg.Node) {
	t.routeMu.Lock()
	defer t.routeMu.Unlock()
	nodes, services := t.liveNodes(), t.store.services()
	if t.choosePrimariesLocked(nodes, services) {
		// A service moved between hosts: both must be told.
		t.syncInOrderLocked(nodes, services)
		return
	}
	t.syncNodeLocked(n, services)
}

// syncInOrderLocked runs syncNodeLocked for every node, the new hosts of
// moved services first: each change reaches peers in a map of its own, and
// a peer must never see a service's address routed to no host at all
// (its dialer would then send the connection out of the tailnet), as
// Tailscale's control plane, which sends the move in one map, never shows.
func (t *Tailnet) syncInOrderLocked(nodes []*tailcfg.Node, services []*vipService) {
	gaining := func(n *tailcfg.Node) bool {
		for _, r := range t.serviceRoutesLocked(n.Key, services) {
			if !slices.Contains(t.routes.served[n.Key].routes, r) {
				return true
			}
		}
		return false
	}
	ordered := slices.Clone(nodes)
	slices.SortStableFunc(ordered, func(a, b *tailcfg.Node) int {
		switch ga, gb := gaining(a), gaining(b); {
		case ga && !gb:
			return -1
		case gb && !ga:
			return 1
		}
		return 0
	})
	for _, o := range ordered {
		t.syncNodeLocked(o, services)
	}
}

// syncAll runs syncNode for every live node (after a policy change, a
// service change, a host coming or going).
func (t *Tailnet) syncAll() {
	t.routeMu.Lock()
	defer t.routeMu.Unlock()
	nodes, services := t.liveNodes(), t.store.services()
	t.choosePrimariesLocked(nodes, services)
	t.syncInOrderLocked(nodes, services)
}

func (t *Tailnet) syncNodeLocked(n *tailcfg.Node, services []*vipService) {
	if t.devices.removed(n.Key) {
		return
	}
	adv := advertisedRoutes(n)
	owner := t.loginOf(n)
	info := t.devices.info(n.Key)
	approved := slices.Clone(info.ApprovedRoutes)
	for _, r := range t.routes.policy.autoApproved(adv, n.Tags, owner) {
		if !slices.Contains(approved, r) {
			approved = append(approved, r)
		}
	}
	if len(approved) != len(info.ApprovedRoutes) {
		sortPrefixes(approved)
		t.devices.setApproved(n.Key, approved)
		t.logger.Info("routes approved by the policy's autoApprovers", "device", n.Name, "routes", approved)
		t.saveNodes()
	}
	var routes []netip.Prefix
	for _, r := range adv {
		if slices.Contains(approved, r) {
			routes = append(routes, r)
		}
	}
	routes = append(routes, t.serviceRoutesLocked(n.Key, services)...)
	sortPrefixes(routes)
	hosted := t.hostedLocked(n, services)
	var certDomains []string
	for _, s := range hosted {
		certDomains = append(certDomains, s.label()+"."+t.MagicDNSDomain)
	}
	caps := withServiceHost(t.routes.policy.capMap(n.Tags, owner), hosted)
	capsJSON, _ := json.Marshal(caps)
	last, seen := t.routes.served[n.Key]
	if !slices.Equal(last.routes, routes) && (seen || len(routes) > 0) {
		t.Control.SetSubnetRoutes(n.Key, routes)
	}
	if last.caps != string(capsJSON) && (seen || caps != nil) {
		// Also brings the node its new certificate names (serveMap).
		t.Control.SetNodeCapMap(n.Key, caps)
	}
	t.routes.served[n.Key] = served{routes: routes, caps: string(capsJSON), certDomains: certDomains}
}

func sortPrefixes(ps []netip.Prefix) {
	slices.SortFunc(ps, func(a, b netip.Prefix) int {
		if d := a.Addr().Compare(b.Addr()); d != 0 {
			return d
		}
		return a.Bits() - b.Bits()
	})
}

func prefixStrings(ps []netip.Prefix) []string {
	out := []string{}
	for _, p := range ps {
		out = append(out, p.String())
	}
	return out
}

// serveGetRoutes is GET /api/v2/device/{id}/routes: the routes the device
// advertises and the ones approved for it ("enabled"; approved routes need
// not be advertised, as when an admin approves ahead).
func (t *Tailnet) serveGetRoutes(w http.ResponseWriter, r *http.Request) {
	n := t.findNode(r.PathValue("id"))
	if n == nil {
		apiError(w, http.StatusNotFound, "device not found")
		return
	}
	t.writeRoutes(w, n)
}

func (t *Tailnet) writeRoutes(w http.ResponseWriter, n *tailcfg.Node) {
	adv := advertisedRoutes(n)
	sortPrefixes(adv)
	writeJSON(w, map[string][]string{
		"advertisedRoutes": prefixStrings(adv),
		"enabledRoutes":    prefixStrings(t.devices.info(n.Key).ApprovedRoutes),
	})
}

// serveSetRoutes is POST /api/v2/device/{id}/routes with {"routes": [...]}:
// the device's approved routes become exactly that list, as when an admin
// approves routes in the console.
func (t *Tailnet) serveSetRoutes(w http.ResponseWriter, r *http.Request) {
	n := t.findNode(r.PathValue("id"))
	if n == nil {
		apiError(w, http.StatusNotFound, "device not found")
		return
	}
	var req struct {
		Routes []string `json:"routes"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		apiError(w, http.StatusBadRequest, "bad request body: "+err.Error())
		return
	}
	var routes []netip.Prefix
	for _, s := range req.Routes {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			apiError(w, http.StatusBadRequest, fmt.Sprintf("route %q is not a CIDR prefix", s))
			return
		}
		if !slices.Contains(routes, p.Masked()) {
			routes = append(routes, p.Masked())
		}
	}
	sortPrefixes(routes)
	t.devices.setApproved(n.Key, routes)
	t.logger.Info("routes approved through the API", "device", n.Name, "routes", routes)
	t.syncNode(n)
	t.saveNodes()
	t.writeRoutes(w, n)
}

// serveGetPolicy is GET /api/v2/tailnet/{tailnet}/acl: the policy file as
// HuJSON when asked for application/hujson, else as JSON.
func (t *Tailnet) serveGetPolicy(w http.ResponseWriter, r *http.Request) {
	t.routeMu.Lock()
	text := t.routes.policy.text
	t.routeMu.Unlock()
	if strings.Contains(r.Header.Get("Accept"), "hujson") || strings.Contains(r.Header.Get("Content-Type"), "hujson") {
		w.Header().Set("Content-Type", "application/hujson")
		_, _ = io.WriteString(w, text)
		return
	}
	std, err := hujson.Standardize([]byte(text))
	if err != nil {
		apiError(w, http.StatusInternalServerError, err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(std)
}

// serveSetPolicy is POST /api/v2/tailnet/{tailnet}/acl: a new policy file
// (HuJSON or JSON). Routes it auto-approves are approved at once; approvals
// made before stay.
func (t *Tailnet) serveSetPolicy(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		apiError(w, http.StatusBadRequest, err.Error())
		return
	}
	text := string(body)
	var quoted string
	if json.Unmarshal(body, &quoted) == nil {
		text = quoted // a HuJSON document sent as a JSON string
	}
	if err := t.SetPolicy(text); err != nil {
		var bad *PolicyError
		if errors.As(err, &bad) {
			apiError(w, http.StatusBadRequest, bad.Err.Error())
			return
		}
		apiError(w, http.StatusInternalServerError, err.Error())
		return
	}
	t.logger.Info("tailnet policy changed through the API")
	w.WriteHeader(http.StatusOK)
}

// PolicyError is a policy file SetPolicy refused, with the reason.
type PolicyError struct{ Err error }

func (e *PolicyError) Error() string { return e.Err.Error() }

func (e *PolicyError) Unwrap() error { return e.Err }

// SetPolicy makes text (HuJSON) the tailnet's policy file at once, as
// the API's POST /acl does: routes it auto-approves are approved (earlier
// approvals stay), node attributes and packet filters change on every
// node. A policy that is not valid is refused with a *PolicyError.
func (t *Tailnet) SetPolicy(text string) error {
	p, err := parsePolicy(text, t.groups)
	if err != nil {
		return &PolicyError{Err: err}
	}
	if err := t.setPolicy(p); err != nil {
		return fmt.Errorf("tailnet: save the policy: %w", err)
	}
	t.syncAll()
	t.wakeAll() // new acls and grants: new packet filters
	return nil
}
