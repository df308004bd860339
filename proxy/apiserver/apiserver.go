// Package apiserver is the Kubernetes API server proxy on the tailnet: an
// http.Handler that identifies each tailnet caller (WhoIs on the
// connection) and forwards the request to the cluster's API server, with
// streaming (watch, logs -f) and protocol upgrades (exec, attach,
// port-forward over SPDY or WebSocket) passed through.
//
// Two modes, as the official operator's API server proxy:
//
//   - auth: the proxy talks to the API server with its own credentials and
//     impersonates the caller: Impersonate-User is the caller's login name
//     (a tagged device: its MagicDNS name), Impersonate-Group the groups
//     of the caller's tailscale.com/cap/kubernetes capability rules (a
//     tagged device with none: its tags). Whatever authentication or
//     impersonation headers the client sent are dropped, so cluster RBAC
//     decides per tailnet identity and never sees the proxy's own.
//   - noauth: the proxy adds no credentials at all; the caller's own
//     Authorization header is what the API server authenticates.
//
// A ProxyGroup replica of type kube-apiserver (package proxy) and the
// operator's own tailnet device (Serve) share this handler.
package apiserver

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/charmbracelet/log"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/transport"
	"tailscale.com/client/tailscale/apitype"
	"tailscale.com/kube/kubetypes"
	"tailscale.com/tailcfg"
)

// Mode says how callers are authenticated to the API server.
type Mode string

// The modes.
const (
	// ModeAuth impersonates the tailnet caller with the proxy's own
	// credentials.
	ModeAuth Mode = "auth"
	// ModeNoAuth forwards without credentials of the proxy: the caller
	// authenticates itself to the API server.
	ModeNoAuth Mode = "noauth"
)

// ParseMode checks a mode name.
func ParseMode(s string) (Mode, error) {
	switch m := Mode(s); m {
	case ModeAuth, ModeNoAuth:
		return m, nil
	}
	return "", fmt.Errorf("unknown API server proxy mode %q (want %q or %q)", s, ModeAuth, ModeNoAuth)
}

// WhoIsFunc identifies a tailnet peer by its address ("ip:port"), as
// tailscale.com/client/local.Client.WhoIs does.
type WhoIsFunc func(ctx context.Context, remoteAddr string) (*apitype.WhoIsResponse, error)

// Options configure NewHandler. All fields but Logger are required.
type Options struct {
	// Upstream is how to reach the API server, with the proxy's own
	// credentials (used in mode auth only).
	Upstream *rest.Config
	Mode     Mode
	WhoIs    WhoIsFunc
	// Logger gets refusals and upstream errors; nil discards them.
	Logger *log.Logger
}

// legacyCapability is the older name of the Kubernetes peer capability;
// the official proxy still reads its impersonation groups.
const legacyCapability = "https://" + tailcfg.PeerCapabilityKubernetes

// impersonateHeaders are what a client might send to act as someone else;
// in mode auth only the proxy's own reach the API server.
var impersonateHeaders = []string{"Authorization", "Impersonate-User", "Impersonate-Group", "Impersonate-Uid"}

type handler struct {
	mode  Mode
	whois WhoIsFunc
	log   *log.Logger
	rp    *httputil.ReverseProxy
}

// identityKey carries the impersonation of one request from ServeHTTP to
// the reverse proxy's Rewrite.
type identityKey struct{}

type identity struct {
	user   string
	groups []string
}

// NewHandler returns the proxy handler. It must be served over TLS with
// HTTP/1.1 (TLSConfig): SPDY upgrades do not exist in HTTP/2.
func NewHandler(o Options) (http.Handler, error) {
	if o.Upstream == nil || o.WhoIs == nil {
		return nil, errors.New("apiserver: Options.Upstream and WhoIs are required")
	}
	if _, err := ParseMode(string(o.Mode)); err != nil {
		return nil, err
	}
	if o.Logger == nil {
		o.Logger = log.New(discard{})
	}
	cfg := rest.CopyConfig(o.Upstream)
	if o.Mode == ModeNoAuth {
		cfg = rest.AnonymousClientConfig(cfg)
	}
	rt, err := upstreamTransport(cfg)
	if err != nil {
		return nil, err
	}
	u, err := url.Parse(cfg.Host)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return nil, fmt.Errorf("apiserver: upstream %q is not a URL with scheme and host", cfg.Host)
	}
	h := &handler{mode: o.Mode, whois: o.WhoIs, log: o.Logger}
	h.rp = &httputil.ReverseProxy{
		Transport: rt,
		// Watches and logs -f are written through as they come.
		FlushInterval: -1,
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(u)
			if h.mode != ModeAuth {
				return
			}
			for _, k := range impersonateHeaders {
				pr.Out.Header.Del(k)
			}
			for k := range pr.Out.Header {
				if strings.HasPrefix(k, "Impersonate-Extra-") {
					pr.Out.Header.Del(k)
				}
			}
			id, _ := pr.In.Context().Value(identityKey{}).(*identity)
			if id == nil {
				// ServeHTTP always sets it; without it the request
				// would go out as the proxy. Poison it instead.
				pr.Out.Header.Set("Impersonate-User", "system:anonymous")
				return
			}
			pr.Out.Header.Set("Impersonate-User", id.user)
			for _, g := range id.groups {
				pr.Out.Header.Add("Impersonate-Group", g)
			}
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if r.Context().Err() != nil {
				return // the client went away
			}
			h.log.Warn("API server request failed", "method", r.Method, "path", r.URL.Path, "err", err)
			writeStatus(w, http.StatusBadGateway, metav1.StatusReasonServiceUnavailable, "the API server proxy cannot reach the API server")
		},
	}
	return h, nil
}

// upstreamTransport speaks HTTP/1.1 only to the API server, as upgraded
// connections need, with the config's TLS and credentials.
func upstreamTransport(cfg *rest.Config) (http.RoundTripper, error) {
	tc, err := cfg.TransportConfig()
	if err != nil {
		return nil, fmt.Errorf("apiserver: upstream transport config: %w", err)
	}
	tlsCfg, err := transport.TLSConfigFor(tc)
	if err != nil {
		return nil, fmt.Errorf("apiserver: upstream TLS config: %w", err)
	}
	tr := &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		TLSClientConfig:       tlsCfg,
		TLSHandshakeTimeout:   10 * time.Second,
		MaxIdleConnsPerHost:   100,
		IdleConnTimeout:       90 * time.Second,
		ExpectContinueTimeout: time.Second,
		TLSNextProto:          map[string]func(string, *tls.Conn) http.RoundTripper{},
	}
	rt, err := transport.HTTPWrappersForConfig(tc, tr)
	if err != nil {
		return nil, fmt.Errorf("apiserver: upstream credentials: %w", err)
	}
	return rt, nil
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	who, err := h.whois(r.Context(), r.RemoteAddr)
	if err == nil && (who == nil || who.Node == nil) {
		err = errors.New("no tailnet node at that address")
	}
	if err != nil {
		h.log.Warn("refused: the caller is not a known tailnet device", "remote", r.RemoteAddr, "err", err)
		writeStatus(w, http.StatusUnauthorized, metav1.StatusReasonUnauthorized, "the caller could not be identified on the tailnet")
		return
	}
	if h.mode == ModeAuth {
		id, err := impersonation(who)
		if err != nil {
			h.log.Warn("refused: cannot tell whom to impersonate", "remote", r.RemoteAddr, "node", who.Node.Name, "err", err)
			writeStatus(w, http.StatusForbidden, metav1.StatusReasonForbidden, "the API server proxy cannot tell whom to impersonate: "+err.Error())
			return
		}
		h.log.Debug("forwarding", "method", r.Method, "path", r.URL.Path, "user", id.user, "groups", id.groups)
		r = r.WithContext(context.WithValue(r.Context(), identityKey{}, id))
	}
	h.rp.ServeHTTP(w, r)
}

// impersonation is who a caller acts as in mode auth.
func impersonation(who *apitype.WhoIsResponse) (*identity, error) {
	rules, err := tailcfg.UnmarshalCapJSON[kubetypes.KubernetesCapRule](who.CapMap, tailcfg.PeerCapabilityKubernetes)
	if err == nil && len(rules) == 0 {
		rules, err = tailcfg.UnmarshalCapJSON[kubetypes.KubernetesCapRule](who.CapMap, legacyCapability)
	}
	if err != nil {
		return nil, fmt.Errorf("capability %s: %w", tailcfg.PeerCapabilityKubernetes, err)
	}
	id := &identity{}
	for _, rule := range rules {
		if rule.Impersonate == nil {
			continue
		}
		for _, g := range rule.Impersonate.Groups {
			if !slices.Contains(id.groups, g) {
				id.groups = append(id.groups, g)
			}
		}
	}
	if !who.Node.IsTagged() {
		if who.UserProfile == nil || who.UserProfile.LoginName == "" {
			return nil, errors.New("the device has no tags and no user")
		}
		id.user = who.UserProfile.LoginName
		return id, nil
	}
	// Group impersonation needs a user: a tagged device is its node name,
	// and (as before capabilities existed) its tags are its groups.
	id.user = strings.TrimSuffix(who.Node.Name, ".")
	if id.user == "" {
		return nil, errors.New("the tagged device has no name")
	}
	if len(id.groups) == 0 {
		id.groups = append(id.groups, who.Node.Tags...)
	}
	return id, nil
}

// writeStatus answers with a Kubernetes Status, which kubectl prints.
func writeStatus(w http.ResponseWriter, code int, reason metav1.StatusReason, msg string) {
	st := metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status: metav1.StatusFailure, Code: int32(code), Reason: reason, Message: msg}
	b, _ := json.Marshal(st)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	_, _ = w.Write(b)
}

// TLSConfig serves certificates from getCert with HTTP/1.1 only: SPDY
// (exec, attach, port-forward) cannot run over HTTP/2.
func TLSConfig(getCert func(*tls.ClientHelloInfo) (*tls.Certificate, error)) *tls.Config {
	return &tls.Config{GetCertificate: getCert, NextProtos: []string{"http/1.1"}, MinVersion: tls.VersionTLS12}
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }
