package tailnet

import (
	"bytes"
	"cmp"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"time"

	"tailscale.com/net/netns"
	"tailscale.com/tailcfg"
	"tailscale.com/tstest/integration/testcontrol"
	"tailscale.com/types/key"
)

// server is what the tailnets of one control server share, as Tailscale's
// tailnets share its control plane: testcontrol, the DERP/STUN relay, one
// URL for control and API, and the registration lock (node IDs, which
// give the addresses, are unique across tailnets). Credentials tell the
// tailnets apart: an auth key decides which tailnet a registering node
// joins, an OAuth client's token which tailnet an API call sees.
type server struct {
	control *testcontrol.Server
	fields  *controlFields
	// tailnets are in StartShared's order; the first one's MagicDNS
	// domain is testcontrol's, and nodes of no tailnet are its.
	tailnets []*Tailnet
	relay    *relay
	srv      *http.Server
	conns    *connTracker
	// tlsSrv and tlsConns serve Config.TLSAddr; nil without it.
	tlsSrv   *http.Server
	tlsConns *connTracker
	// regMu makes registrations and renames one at a time: each takes a
	// free ID and name.
	regMu     sync.Mutex
	stop      context.CancelFunc
	closeOnce sync.Once
}

// StartShared runs one control server, relay and API for several tailnets
// until Close, and returns them in cfgs' order. The first Config's Addr,
// RelayHost, TLSAddr and TLSCert serve all of them (the others' are
// ignored); everything else (StateFile, MagicDNSDomain, Policy,
// ClientTags, Groups, OnTXT, Logger) is each tailnet's own. A node joins
// the tailnet whose auth key it registers with and sees only that
// tailnet's peers; an API token addresses the tailnet of the OAuth client
// it was issued to. The control server's keys are kept in the first
// tailnet's StateFile.
func StartShared(ctx context.Context, cfgs ...Config) ([]*Tailnet, error) {
	if len(cfgs) == 0 {
		return nil, errors.New("tailnet: StartShared needs a Config")
	}
	// Nodes in this process dial loopback; no socket marks or routing tricks.
	netns.SetEnabled(false)
	s := &server{}
	domains := map[string]bool{}
	for i, cfg := range cfgs {
		if domains[cfg.MagicDNSDomain] {
			return nil, fmt.Errorf("tailnet: two tailnets with MagicDNS domain %q", cfg.MagicDNSDomain)
		}
		domains[cfg.MagicDNSDomain] = true
		t, err := newTailnet(cfg, tailcfg.UserID(1+i))
		if err != nil {
			return nil, err
		}
		t.hub = s
		s.tailnets = append(s.tailnets, t)
	}
	first := cfgs[0]
	logf := func(format string, args ...any) { first.Logger.Debug(fmt.Sprintf(format, args...)) }
	rl, derpMap, err := startRelay(ctx, cmp.Or(first.RelayHost, "127.0.0.1"), logf)
	if err != nil {
		return nil, err
	}
	s.relay = rl
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", first.Addr)
	if err != nil {
		rl.close()
		return nil, fmt.Errorf("tailnet listen %s: %w", first.Addr, err)
	}
	url := "http://" + ln.Addr().String()
	// Background work outlives Start's ctx, which only bounds starting.
	bg, stop := context.WithCancel(context.WithoutCancel(ctx))
	s.stop = stop
	s.control = &testcontrol.Server{
		Logf: logf, DERPMap: derpMap, MagicDNSDomain: first.MagicDNSDomain, AllOnline: true,
		ExplicitBaseURL: url,
		// MagicDNS on: node names resolve, and HTTPS certificates are
		// allowed. serveMap gives other tailnets' nodes their own domain.
		DNSConfig: &tailcfg.DNSConfig{Proxied: true, Domains: []string{first.MagicDNSDomain}},
		OnSetDNS:  s.onSetDNS,
	}
	s.control.HoldMapRequest = func(req *tailcfg.MapRequest) func() { return s.tailnetOf(req.NodeKey).afterMapRequest(req) }
	for _, t := range s.tailnets {
		t.URL, t.Control, t.ctx = url, s.control, bg
	}
	if err := s.prepareControl(); err != nil {
		stop()
		ln.Close()
		rl.close()
		return nil, err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/api/v2/", s.serveAPI)
	for _, p := range []string{"/key", "/ts2021", "/machine/", "/generate_204", "/c2n/"} {
		mux.Handle(p, s.control)
	}
	// testcontrol panics on paths it does not know; answer those here.
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "devcluster tailnet: no such endpoint "+r.URL.Path, http.StatusNotFound)
	})
	s.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	s.conns = &connTracker{Listener: ln, conns: map[*trackedConn]struct{}{}}
	if first.TLSAddr != "" {
		tln, err := lc.Listen(ctx, "tcp", first.TLSAddr)
		if err != nil {
			stop()
			ln.Close()
			rl.close()
			return nil, fmt.Errorf("tailnet listen %s (TLS): %w", first.TLSAddr, err)
		}
		s.tlsSrv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second,
			TLSConfig:    &tls.Config{Certificates: []tls.Certificate{*first.TLSCert}},
			TLSNextProto: map[string]func(*http.Server, *tls.Conn, http.Handler){}}
		s.tlsConns = &connTracker{Listener: tln, conns: map[*trackedConn]struct{}{}}
		go func() { _ = s.tlsSrv.ServeTLS(s.tlsConns, "", "") }()
	}
	go func() { _ = s.srv.Serve(s.conns) }()
	return s.tailnets, nil
}

func (s *server) close() {
	s.closeOnce.Do(func() {
		s.stop()
		_ = s.srv.Close()
		s.conns.closeAll()
		if s.tlsSrv != nil {
			_ = s.tlsSrv.Close()
			s.tlsConns.closeAll()
		}
		s.relay.close()
		for _, t := range s.tailnets {
			t.saveNodes()
		}
	})
}

// prepareControl reaches into testcontrol (see controlFields), restores the
// saved keys and every tailnet's nodes, and puts devcluster's handlers in
// front of testcontrol's register, map and set-dns handlers: testcontrol
// knows one shared auth key and one tailnet, so registrations must carry a
// key minted through the API (reusable, single-use, tags, ephemeral),
// which also decides the node's tailnet, and each node's maps are its own
// tailnet's. testcontrol keeps those handlers in an unexported mux,
// swapped here before the server serves anything.
func (s *server) prepareControl() error {
	// The first request builds testcontrol's mux.
	s.control.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/generate_204", nil))
	f, err := reachControl(s.control)
	if err != nil {
		return err
	}
	s.fields = f
	noise, legacy, err := s.tailnets[0].store.controlKeys()
	if err != nil {
		return err
	}
	f.setKeys(noise, legacy)
	for _, t := range s.tailnets {
		t.fields = f
		t.restoreNodes()
	}
	// The control server starts with no routes or capabilities: give the
	// restored nodes theirs, once every tailnet's nodes are known.
	for _, t := range s.tailnets {
		t.syncAll()
	}
	orig := *f.mux
	guarded := http.NewServeMux()
	guarded.Handle("/", orig)
	guarded.HandleFunc("/machine/register", func(w http.ResponseWriter, r *http.Request) {
		req, ok := peek(w, r)
		if ok {
			s.tailnetForRegister(req).serveRegister(w, r, orig)
		}
	})
	guarded.HandleFunc("/machine/map", func(w http.ResponseWriter, r *http.Request) {
		if req, ok := peek(w, r); ok {
			s.tailnetOf(req.NodeKey).serveMap(w, r, orig)
		}
	})
	guarded.HandleFunc("/machine/set-dns", func(w http.ResponseWriter, r *http.Request) {
		if req, ok := peek(w, r); ok {
			s.tailnetOf(req.NodeKey).serveSetDNS(w, r, orig)
		}
	})
	*f.mux = guarded
	return nil
}

// peeked is what the control handlers need of a request to tell its
// tailnet.
type peeked struct {
	NodeKey, OldNodeKey key.NodePublic
	Auth                *struct{ AuthKey string }
}

// peek reads the node keys and auth key of a register, map or set-dns
// request and leaves its body to be read again.
func peek(w http.ResponseWriter, r *http.Request) (peeked, bool) {
	var p peeked
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return p, false
	}
	if err := json.Unmarshal(body, &p); err != nil {
		http.Error(w, "bad request: "+err.Error(), http.StatusBadRequest)
		return p, false
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	return p, true
}

// tailnetOf is the tailnet of the node with key k: the one where it is a
// live device, else one where it was deleted, else the first.
func (s *server) tailnetOf(k key.NodePublic) *Tailnet {
	var deleted *Tailnet
	for _, t := range s.tailnets {
		if in, removed := t.devices.member(k); in && !removed {
			return t
		} else if in && deleted == nil {
			deleted = t
		}
	}
	if deleted != nil {
		return deleted
	}
	return s.tailnets[0]
}

// tailnetForRegister is the tailnet a registration is for: the one that
// minted its auth key, else the one that let its node key in before (a
// resumed node, or one rotating its key), else the first (which refuses
// an unknown key).
func (s *server) tailnetForRegister(req peeked) *Tailnet {
	if req.Auth != nil && req.Auth.AuthKey != "" {
		for _, t := range s.tailnets {
			if t.store.minted(req.Auth.AuthKey) {
				return t
			}
		}
	}
	for _, t := range s.tailnets {
		if _, ok := t.store.admitted(req.NodeKey.String()); ok {
			return t
		}
	}
	if !req.OldNodeKey.IsZero() {
		return s.tailnetOf(req.OldNodeKey)
	}
	return s.tailnetOf(req.NodeKey)
}

// claim makes the node with key k a device of t only: a node that
// registers with another tailnet's auth key leaves the tailnet it was in,
// as on Tailscale, where it would be a new device there.
func (s *server) claim(t *Tailnet, k key.NodePublic) {
	for _, o := range s.tailnets {
		if in, removed := o.devices.member(k); o == t || !in || removed {
			continue
		}
		o.devices.remove(k)
		if a, ok := o.store.admitted(k.String()); ok {
			a.Removed = true
			o.store.admit(k.String(), a)
		}
		o.saveNodes()
	}
}

// onSetDNS publishes a DNS-01 record through its node's tailnet.
func (s *server) onSetDNS(req *tailcfg.SetDNSRequest) error {
	t := s.tailnetOf(req.NodeKey)
	if t.onTXT != nil {
		t.onTXT(t.txtName(req), req.Value)
	}
	return nil
}

// serveAPI passes an API call to the tailnet its credentials belong to:
// the OAuth client's (or federated client's) for a token request, the
// token's for the others.
// Calls with neither go to the first tailnet, which refuses them.
func (s *server) serveAPI(w http.ResponseWriter, r *http.Request) {
	t := s.tailnets[0]
	if r.URL.Path == "/api/v2/oauth/token" || r.URL.Path == "/api/v2/oauth/token-exchange" {
		if r.ParseForm() == nil {
			id, _, ok := r.BasicAuth()
			if !ok {
				id = r.PostForm.Get("client_id")
			}
			for _, o := range s.tailnets {
				if o.ClientID == id || (id != "" && o.federatedClientID() == id) {
					t = o
				}
			}
		}
	} else if tok, ok := apiToken(r); ok {
		for _, o := range s.tailnets {
			if o.store.validToken(tok) {
				t = o
			}
		}
	}
	t.api.ServeHTTP(w, r)
}
