package tailnet

import (
	"cmp"
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"tailscale.com/tailcfg"
)

// apiHandler serves the subset of the Tailscale API that the operator and
// tailscale.com/client/tailscale/v2 need, with the official API's paths,
// JSON shapes and error format ({"message": ...}).
func (t *Tailnet) apiHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /api/v2/oauth/token", t.serveToken)
	mux.HandleFunc("POST /api/v2/oauth/token-exchange", t.serveTokenExchange)
	mux.Handle("GET /api/v2/tailnet/{tailnet}/keys", t.authed(t.serveListKeys))
	mux.Handle("POST /api/v2/tailnet/{tailnet}/keys", t.authed(t.serveCreateKey))
	mux.Handle("GET /api/v2/tailnet/{tailnet}/keys/{id}", t.authed(t.serveGetKey))
	mux.Handle("DELETE /api/v2/tailnet/{tailnet}/keys/{id}", t.authed(t.serveDeleteKey))
	mux.Handle("GET /api/v2/tailnet/{tailnet}/devices", t.authed(t.serveListDevices))
	mux.Handle("GET /api/v2/device/{id}", t.authed(t.serveGetDevice))
	mux.Handle("DELETE /api/v2/device/{id}", t.authed(t.serveDeleteDevice))
	mux.Handle("POST /api/v2/device/{id}/tags", t.authed(t.serveSetTags))
	mux.Handle("GET /api/v2/device/{id}/routes", t.authed(t.serveGetRoutes))
	mux.Handle("POST /api/v2/device/{id}/routes", t.authed(t.serveSetRoutes))
	mux.Handle("GET /api/v2/tailnet/{tailnet}/acl", t.authed(t.serveGetPolicy))
	mux.Handle("POST /api/v2/tailnet/{tailnet}/acl", t.authed(t.serveSetPolicy))
	mux.Handle("GET /api/v2/tailnet/{tailnet}/vip-services", t.authed(t.serveListServices))
	mux.Handle("GET /api/v2/tailnet/{tailnet}/vip-services/{name}", t.authed(t.serveGetService))
	mux.Handle("PUT /api/v2/tailnet/{tailnet}/vip-services/{name}", t.authed(t.servePutService))
	mux.Handle("DELETE /api/v2/tailnet/{tailnet}/vip-services/{name}", t.authed(t.serveDeleteService))
	mux.Handle("GET /api/v2/tailnet/{tailnet}/devcluster/reach", t.authed(t.serveReach))
	mux.HandleFunc("/api/v2/", func(w http.ResponseWriter, r *http.Request) {
		apiError(w, http.StatusNotFound, "devcluster's Tailscale API does not implement "+r.Method+" "+r.URL.Path)
	})
	return mux
}

func apiError(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]string{"message": msg})
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// serveToken is the OAuth client-credentials grant (form or basic auth).
func (t *Tailnet) serveToken(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		apiError(w, http.StatusBadRequest, "bad form: "+err.Error())
		return
	}
	if gt := r.PostForm.Get("grant_type"); gt != "client_credentials" {
		apiError(w, http.StatusBadRequest, "unsupported grant_type "+strconv.Quote(gt))
		return
	}
	id, secret, ok := r.BasicAuth()
	if !ok {
		id, secret = r.PostForm.Get("client_id"), r.PostForm.Get("client_secret")
	}
	tok, err := t.store.issueToken(id, secret)
	if err != nil {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		_ = json.NewEncoder(w).Encode(map[string]string{"error": "invalid_client", "error_description": err.Error()})
		return
	}
	writeJSON(w, map[string]any{"access_token": tok, "token_type": "Bearer", "expires_in": 3600, "scope": r.PostForm.Get("scope")})
}

func (t *Tailnet) authed(h http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok, ok := apiToken(r)
		if !ok || !t.store.validToken(tok) {
			apiError(w, http.StatusUnauthorized, "API token invalid")
			return
		}
		h(w, r)
	})
}

// apiToken is the API token r carries: a bearer token, or an API key
// sent as the basic-auth user.
func apiToken(r *http.Request) (string, bool) {
	if tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
		return tok, true
	}
	if user, _, basic := r.BasicAuth(); basic {
		return user, true
	}
	return "", false
}

// keyJSON is the API's key object.
type keyJSON struct {
	ID            string    `json:"id"`
	KeyType       string    `json:"keyType"`
	Key           string    `json:"key,omitempty"`
	Description   string    `json:"description"`
	ExpirySeconds int64     `json:"expirySeconds,omitempty"`
	Created       time.Time `json:"created"`
	Updated       time.Time `json:"updated"`
	Expires       time.Time `json:"expires"`
	Revoked       time.Time `json:"revoked,omitzero"`
	Invalid       bool      `json:"invalid"`
	Capabilities  keyCaps   `json:"capabilities"`
	Tags          []string  `json:"tags,omitempty"`
}

type keyCaps struct {
	Devices struct {
		Create struct {
			Reusable      bool     `json:"reusable"`
			Ephemeral     bool     `json:"ephemeral"`
			Tags          []string `json:"tags"`
			Preauthorized bool     `json:"preauthorized"`
		} `json:"create"`
	} `json:"devices"`
}

func toJSON(k *authKey, withSecret bool) keyJSON {
	j := keyJSON{ID: k.ID, KeyType: "auth", Description: k.Description, Created: k.Created, Updated: k.Created,
		Expires: k.Expires, Revoked: k.Revoked, Tags: k.Tags,
		Invalid: !k.Revoked.IsZero() || time.Now().After(k.Expires) || (!k.Reusable && k.Uses > 0)}
	c := &j.Capabilities.Devices.Create
	c.Reusable, c.Ephemeral, c.Tags, c.Preauthorized = k.Reusable, k.Ephemeral, k.Tags, k.Preauthorized
	if withSecret {
		j.Key = k.Secret
	}
	return j
}

func (t *Tailnet) serveCreateKey(w http.ResponseWriter, r *http.Request) {
	var req struct {
		KeyType       string  `json:"keyType"`
		Capabilities  keyCaps `json:"capabilities"`
		ExpirySeconds int64   `json:"expirySeconds"`
		Description   string  `json:"description"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		apiError(w, http.StatusBadRequest, "bad request body: "+err.Error())
		return
	}
	if req.KeyType != "" && req.KeyType != "auth" {
		apiError(w, http.StatusBadRequest, "devcluster only mints auth keys, not keyType "+strconv.Quote(req.KeyType))
		return
	}
	c := req.Capabilities.Devices.Create
	for _, tag := range c.Tags {
		if !strings.HasPrefix(tag, "tag:") || len(tag) < 5 {
			apiError(w, http.StatusBadRequest, "tags must look like tag:name, got "+strconv.Quote(tag))
			return
		}
	}
	t.routeMu.Lock()
	p := t.routes.policy
	t.routeMu.Unlock()
	if err := p.checkKeyTags(t.clientTags, c.Tags); err != nil {
		t.logger.Warn("auth key refused: the OAuth client's tags do not own the requested tags (tagOwners)",
			"client_tags", t.clientTags, "tags", c.Tags)
		apiError(w, http.StatusBadRequest, err.Error())
		return
	}
	exp := time.Duration(req.ExpirySeconds) * time.Second
	if exp <= 0 {
		exp = 90 * 24 * time.Hour
	}
	now := time.Now().UTC()
	k, err := t.store.mint(authKey{Description: req.Description, Created: now, Expires: now.Add(exp),
		Reusable: c.Reusable, Ephemeral: c.Ephemeral, Preauthorized: c.Preauthorized, Tags: c.Tags})
	if err != nil {
		apiError(w, http.StatusInternalServerError, err.Error())
		return
	}
	writeJSON(w, toJSON(k, true))
}

func (t *Tailnet) serveListKeys(w http.ResponseWriter, r *http.Request) {
	out := []keyJSON{}
	for _, k := range t.store.list() {
		out = append(out, toJSON(&k, false))
	}
	writeJSON(w, map[string]any{"keys": out})
}

func (t *Tailnet) serveGetKey(w http.ResponseWriter, r *http.Request) {
	k, ok := t.store.get(r.PathValue("id"))
	if !ok {
		apiError(w, http.StatusNotFound, "key not found")
		return
	}
	writeJSON(w, toJSON(k, false))
}

func (t *Tailnet) serveDeleteKey(w http.ResponseWriter, r *http.Request) {
	if !t.store.revoke(r.PathValue("id")) {
		apiError(w, http.StatusNotFound, "key not found")
		return
	}
	w.WriteHeader(http.StatusOK)
}

// deviceJSON is the API's device object.
type deviceJSON struct {
	Addresses          []string `json:"addresses"`
	Name               string   `json:"name"`
	ID                 string   `json:"id"`
	NodeID             string   `json:"nodeId"`
	Authorized         bool     `json:"authorized"`
	User               string   `json:"user"`
	Tags               []string `json:"tags"`
	KeyExpiryDisabled  bool     `json:"keyExpiryDisabled"`
	ClientVersion      string   `json:"clientVersion"`
	Created            string   `json:"created"`
	Expires            string   `json:"expires"`
	Hostname           string   `json:"hostname"`
	IsEphemeral        bool     `json:"isEphemeral"`
	ConnectedToControl bool     `json:"connectedToControl"`
	MachineKey         string   `json:"machineKey"`
	NodeKey            string   `json:"nodeKey"`
	OS                 string   `json:"os"`
}

func (t *Tailnet) device(n *tailcfg.Node) deviceJSON {
	info := t.devices.info(n.Key)
	d := deviceJSON{
		Name: strings.TrimSuffix(n.Name, "."), ID: strconv.FormatInt(int64(n.ID), 10), NodeID: string(n.StableID),
		Authorized: n.MachineAuthorized, User: cmp.Or(t.loginOf(n), t.defaultLogin()), Tags: slices.Clone(n.Tags),
		Created: info.Created.UTC().Format(time.RFC3339), Hostname: n.Hostinfo.Hostname(), IsEphemeral: info.Ephemeral,
		ConnectedToControl: true, MachineKey: n.Machine.String(), NodeKey: n.Key.String(), OS: n.Hostinfo.OS(),
		ClientVersion: n.Hostinfo.IPNVersion(), KeyExpiryDisabled: n.KeyExpiry.IsZero(),
	}
	if d.Tags == nil {
		d.Tags = []string{}
	}
	if !n.KeyExpiry.IsZero() {
		d.Expires = n.KeyExpiry.UTC().Format(time.RFC3339)
	}
	for _, a := range n.Addresses {
		d.Addresses = append(d.Addresses, a.Addr().String())
	}
	return d
}

func (t *Tailnet) serveListDevices(w http.ResponseWriter, r *http.Request) {
	out := []deviceJSON{}
	for _, n := range t.liveNodes() {
		out = append(out, t.device(n))
	}
	writeJSON(w, map[string]any{"devices": out})
}

func (t *Tailnet) findNode(id string) *tailcfg.Node {
	for _, n := range t.liveNodes() {
		if string(n.StableID) == id || strconv.FormatInt(int64(n.ID), 10) == id {
			return n
		}
	}
	return nil
}

func (t *Tailnet) serveGetDevice(w http.ResponseWriter, r *http.Request) {
	n := t.findNode(r.PathValue("id"))
	if n == nil {
		apiError(w, http.StatusNotFound, "device not found")
		return
	}
	writeJSON(w, t.device(n))
}

func (t *Tailnet) serveDeleteDevice(w http.ResponseWriter, r *http.Request) {
	n := t.findNode(r.PathValue("id"))
	if n == nil {
		apiError(w, http.StatusNotFound, "device not found")
		return
	}
	t.removeNode(n)
	w.WriteHeader(http.StatusOK)
}

func (t *Tailnet) serveSetTags(w http.ResponseWriter, r *http.Request) {
	n := t.findNode(r.PathValue("id"))
	if n == nil {
		apiError(w, http.StatusNotFound, "device not found")
		return
	}
	var req struct {
		Tags []string `json:"tags"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		apiError(w, http.StatusBadRequest, "bad request body: "+err.Error())
		return
	}
	n.Tags = req.Tags
	u, l := t.owner(n.Tags, t.devices.info(n.Key).User)
	t.fields.setOwner(n.Key, u, l)
	n.User = u.ID
	t.Control.UpdateNode(n)
	t.syncNode(n)
	t.saveNodes()
	w.WriteHeader(http.StatusOK)
}
