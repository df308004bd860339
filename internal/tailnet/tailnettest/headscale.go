package tailnettest

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"sync"
)

// HeadscaleAPI serves the part of Headscale's REST API (v0.27, /api/v1)
// that minting a pre-auth key calls: the policy, the keys' user and key
// creation. The tests of what a real Headscale does run against one
// (internal/headscaletest); this double lets tests without Headscale's
// build choose the policy and see which keys were asked for.
type HeadscaleAPI struct {
	*httptest.Server

	mu            sync.Mutex
	policy        string
	policyStatus  int // 0: answer with policy
	policyMessage string
	minted        [][]string
}

// NewHeadscaleAPI starts the double with no policy file: Headscale's
// answer to GET /api/v1/policy when policy.path is empty. Close it when done.
func NewHeadscaleAPI() *HeadscaleAPI {
	a := &HeadscaleAPI{policyStatus: http.StatusInternalServerError,
		policyMessage: `reading policy from path "": open : no such file or directory`}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/v1/policy", a.getPolicy)
	mux.HandleFunc("GET /api/v1/user", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"users": []map[string]string{{"id": "1", "name": r.URL.Query().Get("name")}}})
	})
	mux.HandleFunc("POST /api/v1/preauthkey", a.createKey)
	a.Server = httptest.NewServer(mux)
	return a
}

// SetPolicy makes GET /api/v1/policy return policy (HuJSON).
func (a *HeadscaleAPI) SetPolicy(policy string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.policy, a.policyStatus = policy, 0
}

// FailPolicy makes GET /api/v1/policy fail with status and message.
func (a *HeadscaleAPI) FailPolicy(status int, message string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.policyStatus, a.policyMessage = status, message
}

// Minted returns the tags of every key minted so far.
func (a *HeadscaleAPI) Minted() [][]string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.minted)
}

func (a *HeadscaleAPI) getPolicy(w http.ResponseWriter, _ *http.Request) {
	a.mu.Lock()
	status, msg, policy := a.policyStatus, a.policyMessage, a.policy
	a.mu.Unlock()
	if status != 0 {
		writeJSON(w, status, map[string]any{"code": 2, "message": msg})
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"policy": policy})
}

func (a *HeadscaleAPI) createKey(w http.ResponseWriter, r *http.Request) {
	var req struct {
		ACLTags []string `json:"aclTags"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, `{"message": "bad request"}`, http.StatusBadRequest)
		return
	}
	a.mu.Lock()
	a.minted = append(a.minted, req.ACLTags)
	id := strconv.Itoa(len(a.minted))
	a.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]any{"preAuthKey": map[string]any{"id": id, "key": "hskey-auth-" + id, "aclTags": req.ACLTags}})
}
