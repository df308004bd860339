package tailnet

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	tsapi "tailscale.com/client/tailscale/v2"
	"tailscale.com/tailcfg"
)

// Reach is the answer of devcluster's reachability check: whether the
// tailnet policy lets a TCP connection from one tailnet address into
// another address and port, and why.
type Reach struct {
	// Allowed is true when the destination's packet filter accepts the
	// source on that port.
	Allowed bool `json:"allowed"`
	// Reason says what decided it, for a person to read.
	Reason string `json:"reason"`
}

// reach answers whether src may open a TCP connection to dst:port under
// the current policy, by the packet filter the destination's node gets
// (packetFilterFor): exactly what that node will enforce. The second
// result is false when no live node has dst among its addresses or
// Tailscale Services.
func (t *Tailnet) reach(src, dst netip.Addr, port uint16) (Reach, bool) {
	var host *tailcfg.Node
	var enforced bool
	func() {
		t.routeMu.Lock()
		defer t.routeMu.Unlock()
		enforced = t.routes.policy.enforcesIP()
		services := t.store.services()
		for _, n := range t.liveNodes() {
			gn := t.grantNodeLocked(n, services)
			if slices.ContainsFunc(append(slices.Clone(gn.addrs), gn.vips...), func(p netip.Prefix) bool { return p.Contains(dst) }) {
				host = n
				return
			}
		}
	}()
	if host == nil {
		return Reach{}, false
	}
	name := strings.TrimSuffix(host.Name, ".")
	// testcontrol's own base filter lets everything in; the policy
	// replaces it only when it enforces ip rules.
	base := []tailcfg.FilterRule{{SrcIPs: []string{"*"}, DstPorts: []tailcfg.NetPortRange{{IP: "*", Ports: tailcfg.PortRangeAny}}}}
	for _, r := range t.packetFilterFor(host.Key, base) {
		if filterAccepts(r, src, dst, port) {
			why := "a rule of the tailnet policy lets it in"
			if !enforced {
				why = "the policy has no acls and no grants with ip, so everything is let in"
			}
			return Reach{Allowed: true, Reason: fmt.Sprintf("%s accepts %s on port %d: %s", name, src, port, why)}, true
		}
	}
	return Reach{Reason: fmt.Sprintf("no rule of the tailnet policy (acls, or grants with ip) lets %s reach %s (%s) on port %d: the destination drops the connection", src, dst, name, port)}, true
}

// filterAccepts reports whether rule r lets a TCP packet from src to
// dst:port through.
func filterAccepts(r tailcfg.FilterRule, src, dst netip.Addr, port uint16) bool {
	if len(r.IPProto) > 0 && !slices.Contains(r.IPProto, 6) { // 6: TCP
		return false
	}
	if !slices.ContainsFunc(r.SrcIPs, func(s string) bool { return ipSpecCovers(s, src) }) {
		return false
	}
	return slices.ContainsFunc(r.DstPorts, func(d tailcfg.NetPortRange) bool {
		return ipSpecCovers(d.IP, dst) && d.Ports.First <= port && port <= d.Ports.Last
	})
}

// ipSpecCovers reports whether a packet filter address ("*", an IP, a
// prefix or a range a-b) covers addr.
func ipSpecCovers(spec string, addr netip.Addr) bool {
	if spec == "*" {
		return true
	}
	if lo, hi, ok := strings.Cut(spec, "-"); ok {
		l, err1 := netip.ParseAddr(lo)
		h, err2 := netip.ParseAddr(hi)
		return err1 == nil && err2 == nil && l.Compare(addr) <= 0 && addr.Compare(h) <= 0
	}
	if p, err := netip.ParsePrefix(spec); err == nil {
		return p.Contains(addr)
	}
	a, err := netip.ParseAddr(spec)
	return err == nil && a == addr
}

// serveReach is devcluster's own endpoint (Tailscale's API has none like
// it): GET .../devcluster/reach?src=IP&dst=IP&port=N. devcluster curl asks
// it before dialling, so a connection the policy drops fails at once with
// the reason instead of hanging until the timeout.
func (t *Tailnet) serveReach(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	src, err1 := netip.ParseAddr(q.Get("src"))
	dst, err2 := netip.ParseAddr(q.Get("dst"))
	port, err3 := strconv.ParseUint(q.Get("port"), 10, 16)
	if err1 != nil || err2 != nil || err3 != nil {
		apiError(w, http.StatusBadRequest, "want src=IP&dst=IP&port=N")
		return
	}
	res, ok := t.reach(src, dst, uint16(port))
	if !ok {
		apiError(w, http.StatusNotFound, fmt.Sprintf("no device has the address %s", dst))
		return
	}
	writeJSON(w, res)
}

// AskReach asks devcluster's tailnet API at apiURL, with the OAuth client
// clientID and secret, whether src may reach dst:port (serveReach). found
// is false when no device has dst, or the server is not devcluster's
// (Headscale, or Tailscale itself): nothing is known then.
func AskReach(ctx context.Context, apiURL, clientID, secret string, src, dst netip.Addr, port uint16) (res Reach, found bool, err error) {
	base := strings.TrimSuffix(apiURL, "/")
	oauth := &tsapi.OAuth{ClientID: clientID, ClientSecret: secret}
	hc := oauth.HTTPClient(&http.Client{Timeout: 10 * time.Second}, base)
	u := fmt.Sprintf("%s/api/v2/tailnet/-/devcluster/reach?src=%s&dst=%s&port=%d", base, url.QueryEscape(src.String()), url.QueryEscape(dst.String()), port)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return Reach{}, false, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return Reach{}, false, fmt.Errorf("ask the tailnet whether %s reaches %s:%d: %w", src, dst, port, err)
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusOK:
		if err := json.NewDecoder(resp.Body).Decode(&res); err != nil {
			return Reach{}, false, fmt.Errorf("reach answer: %w", err)
		}
		return res, true, nil
	case http.StatusNotFound:
		return Reach{}, false, nil
	default:
		return Reach{}, false, fmt.Errorf("ask the tailnet whether %s reaches %s:%d: %s", src, dst, port, resp.Status)
	}
}
