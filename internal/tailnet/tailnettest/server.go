// Package tailnettest serves the parts of the Tailscale admin API that the
// operator calls (OAuth client-credentials token, auth keys, devices,
// Tailscale Services) from an
// in-process HTTP server. The SaaS API is the one thing tests may replace
// with a double; everything else in tests is real. The real client library
// talks to it, so requests and answers have the API's wire format.
//
// It imports only the standard library and is meant for tests.
package tailnettest

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"time"
)

// Credentials the server accepts unless changed.
const (
	ClientID     = "test-client-id"
	ClientSecret = "test-client-secret"
)

// KeyRequest is an auth key request the server received, with the key it
// minted (ID and secret).
type KeyRequest struct {
	Tags                               []string
	Reusable, Ephemeral, Preauthorized bool
	Description                        string
	ID, Key                            string
}

// Device is a device the server knows.
type Device struct {
	ID        string   `json:"nodeId"`
	Name      string   `json:"name"`
	Hostname  string   `json:"hostname"`
	Addresses []string `json:"addresses"`
	Tags      []string `json:"tags"`
}

// Failure makes one endpoint answer with an error.
type Failure struct {
	Status  int
	Message string
	// Raw, when set, is sent as the body instead of the JSON error.
	Raw string
}

// Server is the fake API. Its methods are safe for concurrent use.
type Server struct {
	*httptest.Server

	mu           sync.Mutex
	clientID     string
	clientSecret string
	tokens       map[string]bool
	keys         []KeyRequest
	created      map[string]time.Time // key ID -> minted
	used         map[string]bool      // key ID -> a device logged in with it
	revoked      map[string]bool      // key ID -> revoked through the API
	dropMints    int                  // mint, then answer nothing, this many times
	listIDsOnly  bool
	onMint       func(KeyRequest)
	onPutService func(Service)
	devices      map[string]Device
	deleted      []string
	fail         map[string]Failure
	attempts     map[string]int // endpoint -> requests, failed ones too
	services     map[string]Service
	// nextServiceIP numbers the addresses of new Tailscale Services.
	nextServiceIP int
}

// Endpoint names for Fail.
const (
	EndpointToken     = "token"
	EndpointKeys      = "keys" // create an auth key
	EndpointListKeys  = "list-keys"
	EndpointRevokeKey = "revoke-key"
	EndpointDevices   = "devices"
	EndpointDelete    = "delete"
)

// NewServer starts a server; stop it with Close.
func NewServer() *Server {
	s := &Server{
		clientID: ClientID, clientSecret: ClientSecret,
		tokens: map[string]bool{}, devices: map[string]Device{}, fail: map[string]Failure{}, attempts: map[string]int{},
		created: map[string]time.Time{}, used: map[string]bool{}, revoked: map[string]bool{},
		services: map[string]Service{},
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /api/v2/oauth/token", s.token)
	mux.HandleFunc("POST /api/v2/tailnet/{tailnet}/keys", s.authorized(EndpointKeys, s.createKey))
	mux.HandleFunc("GET /api/v2/tailnet/{tailnet}/keys", s.authorized(EndpointListKeys, s.listKeys))
	mux.HandleFunc("GET /api/v2/tailnet/{tailnet}/keys/{id}", s.authorized(EndpointListKeys, s.getKey))
	mux.HandleFunc("DELETE /api/v2/tailnet/{tailnet}/keys/{id}", s.authorized(EndpointRevokeKey, s.revokeKey))
	mux.HandleFunc("GET /api/v2/tailnet/{tailnet}/devices", s.authorized(EndpointDevices, s.listDevices))
	mux.HandleFunc("DELETE /api/v2/device/{id}", s.authorized(EndpointDelete, s.deleteDevice))
	s.registerServices(mux)
	s.Server = httptest.NewServer(mux)
	return s
}

// Attempts is how many requests the endpoint got, failed ones included.
func (s *Server) Attempts(endpoint string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.attempts[endpoint]
}

// Fail makes an endpoint fail with f until Recover.
func (s *Server) Fail(endpoint string, f Failure) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fail[endpoint] = f
}

// Recover makes an endpoint answer normally again.
func (s *Server) Recover(endpoint string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.fail, endpoint)
}

// AddDevice adds a device, as if a proxy had logged in.
func (s *Server) AddDevice(d Device) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.devices[d.ID] = d
}

// Keys returns the auth key requests received so far.
func (s *Server) Keys() []KeyRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]KeyRequest(nil), s.keys...)
}

// Deleted returns the IDs of delete requests received so far, including
// those of unknown devices.
func (s *Server) Deleted() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.deleted...)
}

// Devices returns the devices that exist.
func (s *Server) Devices() []Device {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Device, 0, len(s.devices))
	for _, d := range s.devices {
		out = append(out, d)
	}
	return out
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeFailure(w http.ResponseWriter, f Failure) {
	if f.Raw != "" {
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(f.Status)
		_, _ = w.Write([]byte(f.Raw))
		return
	}
	writeJSON(w, f.Status, map[string]any{"message": f.Message})
}

func (s *Server) failure(endpoint string) (Failure, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f, ok := s.fail[endpoint]
	return f, ok
}

func randomHex() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// token implements the OAuth client-credentials grant.
func (s *Server) token(w http.ResponseWriter, r *http.Request) {
	if f, ok := s.failure(EndpointToken); ok {
		writeJSON(w, f.Status, map[string]any{"error": "invalid_client", "error_description": f.Message})
		return
	}
	if err := r.ParseForm(); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]any{"error": "invalid_request"})
		return
	}
	id, secret, ok := r.BasicAuth()
	if !ok {
		id, secret = r.PostForm.Get("client_id"), r.PostForm.Get("client_secret")
	}
	s.mu.Lock()
	valid := id == s.clientID && secret == s.clientSecret
	s.mu.Unlock()
	if r.PostForm.Get("grant_type") != "client_credentials" || !valid {
		writeJSON(w, http.StatusUnauthorized, map[string]any{"error": "invalid_client", "error_description": "invalid client credentials"})
		return
	}
	tok := "tskey-api-" + randomHex()
	s.mu.Lock()
	s.tokens[tok] = true
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]any{"access_token": tok, "token_type": "Bearer", "expires_in": 3600})
}

func (s *Server) authorized(endpoint string, next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		s.mu.Lock()
		valid := ok && s.tokens[tok]
		s.attempts[endpoint]++
		s.mu.Unlock()
		if !valid {
			writeJSON(w, http.StatusUnauthorized, map[string]any{"message": "API token invalid"})
			return
		}
		if f, ok := s.failure(endpoint); ok {
			writeFailure(w, f)
			return
		}
		next(w, r)
	}
}

func (s *Server) listDevices(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"devices": s.Devices()})
}

func (s *Server) deleteDevice(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	s.mu.Lock()
	s.deleted = append(s.deleted, id)
	_, ok := s.devices[id]
	delete(s.devices, id)
	s.mu.Unlock()
	if !ok {
		writeJSON(w, http.StatusNotFound, map[string]any{"message": "not found"})
		return
	}
	w.WriteHeader(http.StatusOK)
}
