package tailnet

import (
	"bytes"
	"cmp"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"time"

	"github.com/charmbracelet/log"
	"tailscale.com/tailcfg"
	"tailscale.com/tstest/integration/testcontrol"
	"tailscale.com/types/key"
)

// Config describes the tailnet.
type Config struct {
	// StateFile keeps the OAuth client and auth keys across restarts.
	StateFile string
	// Addr is host:port of the control server and API ("127.0.0.1:0": any).
	Addr string
	// RelayHost is the address the DERP and STUN servers listen on and the
	// DERP map names; empty: 127.0.0.1. A real node's pods cannot reach
	// loopback: devcluster gives them the node's bridge address.
	RelayHost string
	// TLSAddr, when set, serves the control server and API over TLS
	// (TLSCert) there too, e.g. "198.19.0.1:443". Tailscale's Noise
	// client falls back to port 443 of a control URL's host, and dials
	// only that port when it dialled control less than 2 minutes before,
	// unless the host is a private or loopback address: the real node's
	// bridge address (198.19.0.0/15, benchmarking) is neither.
	TLSAddr string
	TLSCert *tls.Certificate
	// MagicDNSDomain is the tailnet's DNS suffix; certificates are issued
	// for <host>.<MagicDNSDomain>.
	MagicDNSDomain string
	// Policy is the tailnet policy file (HuJSON) to start with; it replaces
	// the one saved in StateFile. Empty: the saved one, else DefaultPolicy.
	Policy string
	// ClientTags are the tags of the OAuth client (ClientID): it may mint
	// auth keys with these tags and the tags they own in the policy's
	// tagOwners. Empty: none, an admin's client that may use every tag.
	// devcluster gives it tag:k8s-operator, as the official install does.
	ClientTags []string
	// Groups are the groups of the tailnet's user directory (group:name
	// -> member logins), as an identity provider syncs them: the policy
	// may name them without defining them in its groups. Users join with
	// keys from UserAuthKey.
	Groups map[string][]string
	// Federation, when set, is a workload identity federation client of
	// the API besides the OAuth client, with the same rights.
	Federation *Federation
	// OnTXT receives the DNS-01 records nodes publish for certificates.
	OnTXT  func(name, value string)
	Logger *log.Logger
}

// Tailnet is one tailnet of a running control server, DERP/STUN relay and
// API (see StartShared): its OAuth client, auth keys, devices, policy,
// users, Tailscale Services and MagicDNS domain are its own.
type Tailnet struct {
	// URL is the control server's and the API's base URL, the same for
	// every tailnet of one control server.
	URL            string
	MagicDNSDomain string
	ClientID       string
	ClientSecret   string
	// ClientTags are the OAuth client's tags (Config.ClientTags).
	ClientTags []string
	// Control is the in-process control server, shared by the tailnets
	// of StartShared.
	Control *testcontrol.Server

	clientTags []string
	groups     map[string][]string
	// ownerID is the user ID of the tailnet's owner: one per tailnet, so
	// that user profiles of two tailnets never share an ID.
	ownerID tailcfg.UserID
	onTXT   func(name, value string)
	// federation is Config.Federation, nil without one.
	federation *federation

	hub     *server
	api     http.Handler
	store   *store
	devices *deviceRegistry
	fields  *controlFields
	logger  *log.Logger
	// saveMu orders saveNodes calls, so an older snapshot of the nodes
	// never overwrites a newer one.
	saveMu sync.Mutex
	// routeMu guards routes and makes syncNode calls one at a time.
	routeMu sync.Mutex
	routes  routeState
	// txtMu guards pendingTXT: DNS-01 records of names on their way
	// through testcontrol under another name (serveSetDNS).
	txtMu      sync.Mutex
	pendingTXT map[string]string
	// appDNSSig (under routeMu) is the app connectors' DNS that nodes
	// were last sent.
	appDNSSig string
	// ctx ends at Close, stopping background work (c2n fetches).
	ctx context.Context
}

// Start runs one tailnet until Close.
func Start(ctx context.Context, cfg Config) (*Tailnet, error) {
	tns, err := StartShared(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return tns[0], nil
}

// newTailnet loads one tailnet's state and policy; StartShared connects it
// to the control server.
func newTailnet(cfg Config, ownerID tailcfg.UserID) (*Tailnet, error) {
	st, err := loadStore(cfg.StateFile)
	if err != nil {
		return nil, err
	}
	saved := st.policy()
	if slices.Contains(previousDefaultPolicies, saved) {
		saved = DefaultPolicy
	}
	for _, tag := range cfg.ClientTags {
		if err := tailcfg.CheckTag(tag); err != nil {
			return nil, fmt.Errorf("tailnet: ClientTags: %q: %w", tag, err)
		}
	}
	pol, err := parsePolicy(cmp.Or(cfg.Policy, saved, DefaultPolicy), cfg.Groups)
	if err != nil {
		return nil, err
	}
	if err := st.setPolicy(pol.text); err != nil {
		return nil, err
	}
	t := &Tailnet{
		MagicDNSDomain: cfg.MagicDNSDomain,
		ClientID:       st.ClientID, ClientSecret: st.ClientSecret, ClientTags: slices.Clone(cfg.ClientTags),
		clientTags: slices.Clone(cfg.ClientTags), groups: cfg.Groups, ownerID: ownerID, onTXT: cfg.OnTXT,
		store: st, devices: &deviceRegistry{m: map[key.NodePublic]deviceInfo{}}, logger: cfg.Logger,
		routes:     routeState{policy: pol, served: map[key.NodePublic]served{}, vip: newVIPState()},
		pendingTXT: map[string]string{},
	}
	if cfg.Federation != nil {
		t.federation = &federation{Federation: *cfg.Federation}
	}
	t.api = t.apiHandler()
	return t, nil
}

// Close stops the API, the control server and the relay, and saves every
// tailnet's nodes for the next start; closing one tailnet of StartShared
// closes them all.
func (t *Tailnet) Close() { t.hub.close() }

func (t *Tailnet) serveRegister(w http.ResponseWriter, r *http.Request, next http.Handler) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var req tailcfg.RegisterRequest
	if err := json.Unmarshal(body, &req); err != nil {
		http.Error(w, "bad register request: "+err.Error(), http.StatusBadRequest)
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	known := t.Control.Node(req.NodeKey) != nil || (!req.OldNodeKey.IsZero() && t.Control.Node(req.OldNodeKey) != nil)
	// A node of this tailnet, not deleted; a node key of another tailnet
	// (or a deleted device's) needs an auth key of this one.
	mine := (t.Control.Node(req.NodeKey) != nil && t.live(req.NodeKey)) ||
		(!req.OldNodeKey.IsZero() && t.Control.Node(req.OldNodeKey) != nil && t.live(req.OldNodeKey))
	if mine {
		next.ServeHTTP(w, r) // re-registration of a node already let in
		if !req.OldNodeKey.IsZero() && !t.devices.has(req.NodeKey) {
			// A new node key for the same device.
			t.devices.add(req.NodeKey, t.devices.info(req.OldNodeKey))
		}
		if loggingOut(req) && t.devices.info(req.NodeKey).Ephemeral {
			// As on Tailscale, an ephemeral device that logs out is
			// deleted at once (devcluster curl's, after its request).
			if n := t.Control.Node(req.NodeKey); n != nil {
				t.removeNode(n)
			}
		}
		return
	}
	nk := req.NodeKey.String()
	adm, again := t.store.admitted(nk)
	if !again {
		var authKey string
		if req.Auth != nil {
			authKey = req.Auth.AuthKey
		}
		k, err := t.store.use(authKey)
		if err != nil {
			w.WriteHeader(http.StatusOK)
			_ = json.NewEncoder(w).Encode(tailcfg.RegisterResponse{Error: err.Error()})
			return
		}
		adm = admission{KeyID: k.ID, Tags: k.Tags, Ephemeral: k.Ephemeral, User: k.User}
		t.store.admit(nk, adm)
	}
	if known {
		// A deleted device's node key, or another tailnet's, let in
		// again with a new auth key: a new device, as on Tailscale.
		t.fields.remove(req.NodeKey)
		t.hub.claim(t, req.NodeKey)
	}
	t.hub.regMu.Lock()
	defer t.hub.regMu.Unlock()
	// testcontrol takes the new node's owner from its user table.
	u, l := t.owner(adm.Tags, adm.User)
	t.fields.setOwner(req.NodeKey, u, l)
	// The answer waits until the node has its final ID (its IPs), tags and
	// name, so the node never sees provisional ones.
	rec := httptest.NewRecorder()
	next.ServeHTTP(rec, r)
	if n := t.Control.Node(req.NodeKey); n != nil {
		changed := t.uniqueID(n)
		if len(adm.Tags) > 0 {
			n.Tags, changed = adm.Tags, true
		}
		if name := t.nodeName(n); name != n.Name {
			n.Name, changed = name, true
		}
		if changed {
			t.Control.UpdateNode(n)
		}
	}
	t.devices.add(req.NodeKey, deviceInfo{Created: time.Now(), Ephemeral: adm.Ephemeral, KeyID: adm.KeyID, User: adm.User})
	if n := t.Control.Node(req.NodeKey); n != nil {
		t.syncNode(n) // its capabilities, before its first map
	}
	t.saveNodes()
	for k, v := range rec.Header() {
		w.Header()[k] = v
	}
	w.WriteHeader(rec.Code)
	_, _ = w.Write(rec.Body.Bytes())
}

// loggingOut reports whether req is a logout: tailscale's client sends its
// register request with an expiry in the past.
func loggingOut(req tailcfg.RegisterRequest) bool {
	return !req.Expiry.IsZero() && req.Expiry.Before(time.Now())
}

// afterMapRequest runs after each map request with a Hostinfo: the
// device's name follows its hostname, its routes and capabilities follow
// what it advertises (syncNode), and control asks it what it serves when
// its ServicesHash changed.
func (t *Tailnet) afterMapRequest(req *tailcfg.MapRequest) (done func()) {
	if req.Hostinfo == nil {
		return nil
	}
	name := t.followHostname(req)
	return func() {
		if name != nil {
			name()
		}
		if n := t.Control.Node(req.NodeKey); n != nil {
			t.syncNode(n)
			t.maybeFetchServices(n)
		}
		t.appDNSChanged()
	}
}

// followHostname makes a device's MagicDNS name follow its hostname, as
// Tailscale's control server does for machines not renamed by hand: a node
// that reports a new hostname (a proxy whose tailscale.com/hostname
// changed) gets the new name (de-duplicated, see nodeName), and every peer
// learns it. testcontrol keeps the name given at registration; this runs
// after each map request.
func (t *Tailnet) followHostname(req *tailcfg.MapRequest) (done func()) {
	if req.Hostinfo == nil || req.Hostinfo.Hostname == "" {
		return nil
	}
	return func() {
		// Names are decided one at a time, so two nodes never take the
		// same free name.
		t.hub.regMu.Lock()
		defer t.hub.regMu.Unlock()
		n := t.Control.Node(req.NodeKey)
		if n == nil || !n.Hostinfo.Valid() || n.Hostinfo.Hostname() == "" {
			return
		}
		want := t.nodeName(n)
		if n.Name == want {
			return
		}
		// n is a copy: a concurrent update of the node between Node and
		// UpdateNode is lost, and resent by the node's next map request.
		n.Name = want
		t.Control.UpdateNode(n)
		t.saveNodes()
	}
}

// liveNodes are the control server's nodes of this tailnet minus deleted
// devices.
func (t *Tailnet) liveNodes() []*tailcfg.Node {
	var out []*tailcfg.Node
	for _, n := range t.Control.AllNodes() {
		if t.live(n.Key) {
			out = append(out, n)
		}
	}
	return out
}

// live reports whether the node with key k is a device of this tailnet,
// not deleted.
func (t *Tailnet) live(k key.NodePublic) bool {
	return t.hub.tailnetOf(k) == t && !t.devices.removed(k)
}

// removeNode deletes a device: it disappears from the API and from its
// peers' netmaps (serveMap), and its node key expires, which logs the node
// out. testcontrol keeps the node (it has no way to delete one), which is
// what lets the node learn it was logged out.
func (t *Tailnet) removeNode(n *tailcfg.Node) {
	t.devices.remove(n.Key)
	if a, ok := t.store.admitted(n.Key.String()); ok {
		a.Removed = true
		t.store.admit(n.Key.String(), a)
	}
	n.KeyExpiry = time.Now().Add(-time.Minute)
	t.Control.UpdateNode(n)
	t.saveNodes()
	t.syncAll() // services it hosted move to other hosts
}
