package tailnet

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"tailscale.com/net/netaddr"
	"tailscale.com/net/tsaddr"
	"tailscale.com/tailcfg"
	"tailscale.com/types/key"
	"tailscale.com/util/zstdframe"
)

// serveMap passes a map request to testcontrol and rewrites each
// MapResponse it streams back for that node, as Tailscale's control server
// would send it: deleted devices and other tailnets' nodes are left out
// of the peers and their users out of the profiles, a node of a tailnet
// other than the first gets its tailnet's MagicDNS domain, every node
// gets the Tailscale Services' DNS records and a service host the names
// of its services as certificate names, a node's packet filter is the
// policy's (acls, grants' ip and app: packetFilterFor), and in a
// tagged node's own map the tagged-devices profile carries the node's
// MagicDNS name as LoginName (the official operator reads a device's DNS
// name from there, in its state Secret), while other nodes see
// "tagged-devices".
func (t *Tailnet) serveMap(w http.ResponseWriter, r *http.Request, next http.Handler) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var req struct {
		NodeKey  key.NodePublic
		Compress string
		Stream   bool
		ReadOnly bool
	}
	if err := json.Unmarshal(body, &req); err != nil {
		http.Error(w, "bad map request: "+err.Error(), http.StatusBadRequest)
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	if req.Stream && !req.ReadOnly {
		// The node is online (and may be routed to as a service host)
		// while its map poll is open.
		t.streamStarted(req.NodeKey)
		defer t.streamEnded(req.NodeKey)
	}
	next.ServeHTTP(&mapRewriter{ResponseWriter: w, t: t, self: req.NodeKey, compress: req.Compress != ""}, r)
}

// mapRewriter cuts testcontrol's stream into its frames (4-byte
// little-endian length, then the JSON MapResponse, zstd-compressed if the
// node asked) and writes each one rewritten.
type mapRewriter struct {
	http.ResponseWriter
	t        *Tailnet
	self     key.NodePublic
	compress bool
	buf      []byte
	err      error
}

func (m *mapRewriter) Write(p []byte) (int, error) {
	if m.err != nil {
		return 0, m.err
	}
	m.buf = append(m.buf, p...)
	for len(m.buf) >= 4 {
		n := int(binary.LittleEndian.Uint32(m.buf))
		if len(m.buf) < 4+n {
			break
		}
		frame := m.rewrite(m.buf[4 : 4+n])
		m.buf = m.buf[4+n:]
		var size [4]byte
		binary.LittleEndian.PutUint32(size[:], uint32(len(frame)))
		if _, err := m.ResponseWriter.Write(append(size[:], frame...)); err != nil {
			m.err = err
			return 0, err
		}
	}
	return len(p), nil
}

func (m *mapRewriter) Flush() {
	if f, ok := m.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// rewrite returns frame changed as serveMap says, or as it is when there
// is nothing to change (keep-alives) or it cannot be read.
func (m *mapRewriter) rewrite(frame []byte) []byte {
	js := frame
	if m.compress {
		var err error
		if js, err = zstdframe.AppendDecode(nil, frame); err != nil {
			return frame
		}
	}
	var res map[string]json.RawMessage
	if json.Unmarshal(js, &res) != nil || (res["Peers"] == nil && res["UserProfiles"] == nil && res["DNSConfig"] == nil && res["PacketFilter"] == nil && res["Node"] == nil) {
		return frame
	}
	if raw := res["DNSConfig"]; raw != nil && string(raw) != "null" {
		var dns tailcfg.DNSConfig
		if json.Unmarshal(raw, &dns) == nil {
			m.t.ownDomain(m.self, &dns)
			records, certDomains := m.t.serviceDNS(m.self)
			dns.ExtraRecords = append(dns.ExtraRecords, records...)
			dns.CertDomains = append(dns.CertDomains, certDomains...)
			m.t.appDNSRoutes(m.self, &dns)
			res["DNSConfig"], _ = json.Marshal(dns)
		}
	}
	if raw := res["PacketFilter"]; raw != nil && string(raw) != "null" {
		var rules []tailcfg.FilterRule
		if json.Unmarshal(raw, &rules) == nil {
			res["PacketFilter"], _ = json.Marshal(m.t.packetFilterFor(m.self, rules))
		}
	}
	if raw := res["Node"]; raw != nil && string(raw) != "null" {
		res["Node"] = m.t.withoutUngrantedFunnel(m.self, raw)
	}
	if raw := res["Peers"]; raw != nil {
		var peers []json.RawMessage
		if json.Unmarshal(raw, &peers) == nil {
			kept := peers[:0]
			var gone []tailcfg.NodeID
			for _, p := range peers {
				var id struct {
					ID  tailcfg.NodeID
					Key key.NodePublic
				}
				if json.Unmarshal(p, &id) == nil && !m.t.live(id.Key) {
					gone = append(gone, id.ID)
					continue
				}
				kept = append(kept, p)
			}
			res["Peers"], _ = json.Marshal(kept)
			if len(kept) == 0 && len(gone) > 0 {
				// Clients read an empty Peers as "no change": say it.
				delete(res, "Peers")
				res["PeersRemoved"], _ = json.Marshal(gone)
			}
		}
	}
	if raw := res["UserProfiles"]; raw != nil {
		var profiles []tailcfg.UserProfile
		if json.Unmarshal(raw, &profiles) == nil {
			self := m.t.Control.Node(m.self)
			users := m.t.users()
			kept := profiles[:0]
			for _, p := range profiles {
				if !users[p.ID] {
					continue // another tailnet's user
				}
				if p.ID == taggedDevicesID && self != nil && len(self.Tags) > 0 {
					p.LoginName = strings.TrimSuffix(self.Name, ".")
				}
				kept = append(kept, p)
			}
			res["UserProfiles"], _ = json.Marshal(kept)
		}
	}
	out, err := json.Marshal(res)
	if err != nil {
		return frame
	}
	if m.compress {
		out = zstdframe.AppendEncode(nil, out, zstdframe.FastestCompression)
	}
	return out
}

// users are the IDs of the users owning this tailnet's devices.
func (t *Tailnet) users() map[tailcfg.UserID]bool {
	out := map[tailcfg.UserID]bool{}
	for _, n := range t.liveNodes() {
		out[n.User] = true
	}
	return out
}

// ownDomain makes the DNS configuration testcontrol sends node k (in the
// control server's MagicDNS domain, the first tailnet's) that of k's
// tailnet: its search domain and the node's own certificate name.
func (t *Tailnet) ownDomain(k key.NodePublic, dns *tailcfg.DNSConfig) {
	control := t.Control.MagicDNSDomain
	if t.MagicDNSDomain == control {
		return
	}
	for i, d := range dns.Domains {
		if d == control {
			dns.Domains[i] = t.MagicDNSDomain
		}
	}
	if n := t.Control.Node(k); n != nil {
		for i, d := range dns.CertDomains {
			if d == n.Hostinfo.Hostname()+"."+control {
				dns.CertDomains[i] = n.Hostinfo.Hostname() + "." + t.MagicDNSDomain
			}
		}
	}
}

// withoutUngrantedFunnel returns the self node of a map response (raw
// JSON) without the funnel attribute testcontrol gives every node at
// registration (in Capabilities), unless the policy's nodeAttrs give it
// to the node: as on Tailscale, Funnel needs the funnel node attribute.
func (t *Tailnet) withoutUngrantedFunnel(k key.NodePublic, raw json.RawMessage) json.RawMessage {
	var node map[string]json.RawMessage
	var caps []tailcfg.NodeCapability
	if json.Unmarshal(raw, &node) != nil || node["Capabilities"] == nil || json.Unmarshal(node["Capabilities"], &caps) != nil {
		return raw
	}
	if n := t.Control.Node(k); n != nil {
		t.routeMu.Lock()
		_, granted := t.routes.policy.capMap(n.Tags, t.loginOf(n))[tailcfg.NodeAttrFunnel]
		t.routeMu.Unlock()
		if granted {
			return raw
		}
	}
	node["Capabilities"], _ = json.Marshal(slices.DeleteFunc(caps, func(c tailcfg.NodeCapability) bool { return c == tailcfg.NodeAttrFunnel }))
	out, err := json.Marshal(node)
	if err != nil {
		return raw
	}
	return out
}

// nodeName returns the MagicDNS name n should have: its hostname's, or
// hostname-1, -2, ... when another device has that one, as Tailscale's
// control server de-duplicates. A name already derived from the current
// hostname is kept, so the first device keeps "name" and the second keeps
// "name-1" even after the first leaves.
func (t *Tailnet) nodeName(n *tailcfg.Node) string {
	host := n.Hostinfo.Hostname()
	if host == "" {
		return n.Name
	}
	taken := map[string]bool{}
	for _, o := range t.liveNodes() {
		if o.Key != n.Key {
			taken[o.Name] = true
		}
	}
	fqdn := func(label string) string { return label + "." + t.MagicDNSDomain + "." }
	label, _, _ := strings.Cut(n.Name, ".")
	if (label == host || regexp.MustCompile("^"+regexp.QuoteMeta(host)+`-[0-9]+$`).MatchString(label)) && n.Name == fqdn(label) && !taken[n.Name] {
		return n.Name
	}
	for i := 0; ; i++ {
		l := host
		if i > 0 {
			l += "-" + strconv.Itoa(i)
		}
		if !taken[fqdn(l)] {
			return fqdn(l)
		}
	}
}

// uniqueID gives a node registered just now an ID (and so addresses) of
// its own: testcontrol numbers a new node len(nodes)+1, which repeats an ID
// once a device is gone (deleted ones are not restored after a restart).
// It reports whether it changed n.
func (t *Tailnet) uniqueID(n *tailcfg.Node) bool {
	var maxID tailcfg.NodeID
	clash := false
	for _, o := range t.Control.AllNodes() {
		if o.Key == n.Key {
			continue
		}
		clash = clash || o.ID == n.ID
		maxID = max(maxID, o.ID)
	}
	if !clash {
		return false
	}
	id := maxID + 1
	v4 := netip.PrefixFrom(netaddr.IPv4(100, 64, uint8(id>>8), uint8(id)), 32)
	v6 := netip.PrefixFrom(tsaddr.Tailscale4To6(v4.Addr()), 128)
	n.ID, n.StableID = id, tailcfg.StableNodeID(fmt.Sprintf("TESTCTRL%08x", int(id)))
	n.Addresses, n.AllowedIPs = []netip.Prefix{v4, v6}, []netip.Prefix{v4, v6}
	return true
}
