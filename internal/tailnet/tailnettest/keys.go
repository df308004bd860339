package tailnettest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"
)

// DropMintResponses makes the next n key creations mint the key and then
// close the connection without an answer, as if the caller died right after
// the API minted it: the key exists, the caller never learns it.
func (s *Server) DropMintResponses(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.dropMints = n
}

// OnMint calls fn (from the request's goroutine) after each key is minted,
// before the answer is sent; nil removes it.
func (s *Server) OnMint(fn func(KeyRequest)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.onMint = fn
}

// UseKey marks the key with this secret as used by a device logging in, as
// control does: a single-use key then stops working. It reports whether the
// key was known and still valid.
func (s *Server) UseKey(secret string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, k := range s.keys {
		if k.Key == secret {
			if s.revoked[k.ID] || (s.used[k.ID] && !k.Reusable) {
				return false
			}
			s.used[k.ID] = true
			return true
		}
	}
	return false
}

// ValidUnusedKeys returns the keys that could still create a device:
// neither revoked nor (single-use keys) used.
func (s *Server) ValidUnusedKeys() []KeyRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []KeyRequest
	for _, k := range s.keys {
		if !s.invalidLocked(k) {
			out = append(out, k)
		}
	}
	return out
}

// Revoked returns the IDs of the keys revoked so far.
func (s *Server) Revoked() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, k := range s.keys {
		if s.revoked[k.ID] {
			out = append(out, k.ID)
		}
	}
	return out
}

func (s *Server) invalidLocked(k KeyRequest) bool {
	return s.revoked[k.ID] || (s.used[k.ID] && !k.Reusable)
}

func (s *Server) createKey(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Description  string `json:"description"`
		Capabilities struct {
			Devices struct {
				Create struct {
					Reusable, Ephemeral, Preauthorized bool
					Tags                               []string
				} `json:"create"`
			} `json:"devices"`
		} `json:"capabilities"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]any{"message": "invalid JSON: " + err.Error()})
		return
	}
	c := req.Capabilities.Devices.Create
	for _, tag := range c.Tags {
		if !strings.HasPrefix(tag, "tag:") {
			writeJSON(w, http.StatusBadRequest, map[string]any{"message": fmt.Sprintf("requested tags [%s] are invalid or not permitted", tag)})
			return
		}
	}
	if len(req.Description) > 50 {
		writeJSON(w, http.StatusBadRequest, map[string]any{"message": "description must be at most 50 characters"})
		return
	}
	id := "k" + randomHex()[:10]
	kr := KeyRequest{Tags: c.Tags, Reusable: c.Reusable, Ephemeral: c.Ephemeral, Preauthorized: c.Preauthorized,
		Description: req.Description, ID: id, Key: "tskey-auth-" + id + "-" + randomHex()}
	s.mu.Lock()
	s.keys = append(s.keys, kr)
	s.created[id] = time.Now().UTC()
	drop := s.dropMints > 0
	if drop {
		s.dropMints--
	}
	onMint := s.onMint
	s.mu.Unlock()
	if onMint != nil {
		onMint(kr)
	}
	if drop {
		if hj, ok := w.(http.Hijacker); ok {
			if conn, _, err := hj.Hijack(); err == nil {
				conn.Close()
				return
			}
		}
		panic(http.ErrAbortHandler)
	}
	writeJSON(w, http.StatusOK, s.keyJSON(kr, true))
}

// keyJSON is the API's key object.
func (s *Server) keyJSON(k KeyRequest, withSecret bool) map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	caps := map[string]any{"devices": map[string]any{"create": map[string]any{
		"reusable": k.Reusable, "ephemeral": k.Ephemeral, "preauthorized": k.Preauthorized, "tags": k.Tags}}}
	out := map[string]any{"id": k.ID, "keyType": "auth", "description": k.Description, "created": s.created[k.ID],
		"expires": s.created[k.ID].Add(90 * 24 * time.Hour), "invalid": s.invalidLocked(k), "capabilities": caps}
	if withSecret {
		out["key"] = k.Key
	}
	return out
}

func (s *Server) findKey(id string) (KeyRequest, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	i := slices.IndexFunc(s.keys, func(k KeyRequest) bool { return k.ID == id })
	if i < 0 || s.revoked[id] {
		return KeyRequest{}, false
	}
	return s.keys[i], true
}

// ListIDsOnly makes the key list carry only the keys' IDs, as the client
// library documents the API may answer.
func (s *Server) ListIDsOnly(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.listIDsOnly = on
}

// listKeys lists the keys not revoked, as the API does.
func (s *Server) listKeys(w http.ResponseWriter, _ *http.Request) {
	s.mu.Lock()
	idsOnly := s.listIDsOnly
	s.mu.Unlock()
	out := []map[string]any{}
	for _, k := range s.Keys() {
		if _, ok := s.findKey(k.ID); !ok {
			continue
		}
		if idsOnly {
			out = append(out, map[string]any{"id": k.ID})
		} else {
			out = append(out, s.keyJSON(k, false))
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"keys": out})
}

func (s *Server) getKey(w http.ResponseWriter, r *http.Request) {
	k, ok := s.findKey(r.PathValue("id"))
	if !ok {
		writeJSON(w, http.StatusNotFound, map[string]any{"message": "key not found"})
		return
	}
	writeJSON(w, http.StatusOK, s.keyJSON(k, false))
}

func (s *Server) revokeKey(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if _, ok := s.findKey(id); !ok {
		writeJSON(w, http.StatusNotFound, map[string]any{"message": "key not found"})
		return
	}
	s.mu.Lock()
	s.revoked[id] = true
	s.mu.Unlock()
	w.WriteHeader(http.StatusOK)
}
