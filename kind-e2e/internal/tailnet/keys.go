package tailnet

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"time"
)

// authKey is one auth key minted through the API.
type authKey struct {
	ID            string    `json:"id"`
	Secret        string    `json:"secret"`
	Description   string    `json:"description"`
	Created       time.Time `json:"created"`
	Expires       time.Time `json:"expires"`
	Revoked       time.Time `json:"revoked,omitzero"`
	Reusable      bool      `json:"reusable"`
	Ephemeral     bool      `json:"ephemeral"`
	Preauthorized bool      `json:"preauthorized"`
	Tags          []string  `json:"tags"`
	Uses          int       `json:"uses"`
	// User is the login of the user who minted it (UserAuthKey); empty
	// for the OAuth client's keys.
	User string `json:"user,omitempty"`
}

// store is the API's persistent state: the OAuth client and the auth keys.
// It lives in one JSON file so that a resumed cluster keeps both.
type store struct {
	path string

	mu           sync.Mutex
	ClientID     string              `json:"clientId"`
	ClientSecret string              `json:"clientSecret"`
	Keys         map[string]*authKey `json:"keys"`
	// Admitted are the node keys let in so far, with what their auth key
	// gave them, so that nodes rejoin a resumed cluster (whose control
	// server starts empty) without a new auth key.
	Admitted map[string]admission `json:"admitted"`
	// Control is the control server's own state (keys, nodes), so that a
	// resumed cluster is the same tailnet to the nodes that were in it.
	Control controlState `json:"control"`
	// Policy is the tailnet policy file (HuJSON).
	Policy string `json:"policy,omitempty"`
	// Services are the tailnet's Tailscale Services (VIP services) by
	// name, with the addresses they were given.
	Services map[string]*vipService `json:"services,omitempty"`
	tokens   map[string]time.Time
}

// admission is what a node got when it was let in.
type admission struct {
	KeyID     string   `json:"keyId"`
	Tags      []string `json:"tags"`
	Ephemeral bool     `json:"ephemeral"`
	Removed   bool     `json:"removed,omitempty"`
	User      string   `json:"user,omitempty"`
}

func loadStore(path string) (*store, error) {
	s := &store{path: path, Keys: map[string]*authKey{}, Admitted: map[string]admission{}, tokens: map[string]time.Time{}}
	b, err := os.ReadFile(path)
	switch {
	case err == nil:
		if err := json.Unmarshal(b, s); err != nil {
			return nil, fmt.Errorf("read %s: %w", path, err)
		}
		if s.Keys == nil {
			s.Keys = map[string]*authKey{}
		}
		if s.Admitted == nil {
			s.Admitted = map[string]admission{}
		}
	case errors.Is(err, os.ErrNotExist):
		s.ClientID = "k" + randHex(8) + "CNTRL"
		s.ClientSecret = "tskey-client-" + s.ClientID + "-" + randHex(16)
		if err := s.saveLocked(); err != nil {
			return nil, err
		}
	default:
		return nil, err
	}
	return s, nil
}

func (s *store) saveLocked() error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	tmp := s.path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, s.path)
}

// issueToken returns a new OAuth access token valid for an hour.
func (s *store) issueToken(id, secret string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if id != s.ClientID || secret != s.ClientSecret {
		return "", errors.New("invalid client credentials")
	}
	return s.newTokenLocked(), nil
}

// issueFederatedToken returns a new API token valid for an hour, for an
// identity token the federated client's issuer signed.
func (s *store) issueFederatedToken() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.newTokenLocked()
}

func (s *store) newTokenLocked() string {
	tok := "tskey-api-" + randHex(24)
	s.tokens[tok] = time.Now().Add(time.Hour)
	return tok
}

func (s *store) validToken(tok string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	exp, ok := s.tokens[tok]
	return ok && time.Now().Before(exp)
}

func (s *store) mint(k authKey) (*authKey, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k.ID = "k" + randHex(6) + "CNTRL"
	k.Secret = "tskey-auth-" + k.ID + "-" + randHex(16)
	s.Keys[k.ID] = &k
	return &k, s.saveLocked()
}

// use checks an auth key presented at registration and counts the use.
func (s *store) use(secret string) (*authKey, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if secret == "" {
		return nil, errors.New("an auth key is required (mint one through the API: POST /api/v2/tailnet/-/keys)")
	}
	for _, k := range s.Keys {
		if k.Secret != secret {
			continue
		}
		switch {
		case !k.Revoked.IsZero():
			return nil, errors.New("invalid key: revoked")
		case time.Now().After(k.Expires):
			return nil, errors.New("invalid key: expired")
		case !k.Reusable && k.Uses > 0:
			return nil, errors.New("invalid key: single-use key already used")
		}
		k.Uses++
		cp := *k
		cp.Tags = slices.Clone(k.Tags)
		return &cp, s.saveLocked()
	}
	return nil, errors.New("invalid key: unknown auth key")
}

// minted reports whether secret is an auth key of this store, valid or
// not: the key names the tailnet a node registers with.
func (s *store) minted(secret string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, k := range s.Keys {
		if k.Secret == secret {
			return true
		}
	}
	return false
}

func (s *store) get(id string) (*authKey, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k, ok := s.Keys[id]
	if !ok {
		return nil, false
	}
	cp := *k
	return &cp, true
}

func (s *store) list() []authKey {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []authKey
	for _, k := range s.Keys {
		if k.Revoked.IsZero() {
			out = append(out, *k)
		}
	}
	slices.SortFunc(out, func(a, b authKey) int { return a.Created.Compare(b.Created) })
	return out
}

func (s *store) revoke(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	k, ok := s.Keys[id]
	if !ok || !k.Revoked.IsZero() {
		return false
	}
	k.Revoked = time.Now()
	_ = s.saveLocked()
	return true
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return strings.ToUpper(hex.EncodeToString(b))[:n]
}

func (s *store) policy() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.Policy
}

func (s *store) setPolicy(text string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.Policy == text {
		return nil
	}
	s.Policy = text
	return s.saveLocked()
}

// admit records that nodeKey was let in (or removed, when a is marked so).
func (s *store) admit(nodeKey string, a admission) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.Admitted[nodeKey] = a
	_ = s.saveLocked()
}

// admitted returns what nodeKey got when it was let in earlier.
func (s *store) admitted(nodeKey string) (admission, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a, ok := s.Admitted[nodeKey]
	return a, ok && !a.Removed
}
