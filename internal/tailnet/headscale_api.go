package tailnet

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"time"
)

// The JSON shapes of Headscale's REST API (grpc-gateway: lowerCamelCase
// names, 64-bit integers as strings, timestamps in RFC 3339).
type (
	hsUser struct {
		ID   string `json:"id"`
		Name string `json:"name"`
	}
	hsPreAuthKey struct {
		ID         string    `json:"id"`
		Key        string    `json:"key"`
		Reusable   bool      `json:"reusable"`
		Ephemeral  bool      `json:"ephemeral"`
		Used       bool      `json:"used"`
		Expiration time.Time `json:"expiration"`
		CreatedAt  time.Time `json:"createdAt"`
		ACLTags    []string  `json:"aclTags"`
	}
	hsNode struct {
		ID          string   `json:"id"`
		Name        string   `json:"name"`
		GivenName   string   `json:"givenName"`
		IPAddresses []string `json:"ipAddresses"`
		ForcedTags  []string `json:"forcedTags"`
		ValidTags   []string `json:"validTags"`
	}
)

// ownerID returns the ID of the keys' owner, creating the user when
// Headscale has none of that name.
func (h *Headscale) ownerID(ctx context.Context) (string, error) {
	h.mu.Lock()
	id := h.userID
	h.mu.Unlock()
	if id != "" {
		return id, nil
	}
	var list struct {
		Users []hsUser `json:"users"`
	}
	if err := h.do(ctx, "list users", http.MethodGet, "/api/v1/user?name="+url.QueryEscape(h.user), nil, &list); err != nil {
		return "", err
	}
	for _, u := range list.Users {
		if u.Name == h.user {
			id = u.ID
		}
	}
	if id == "" {
		var created struct {
			User hsUser `json:"user"`
		}
		if err := h.do(ctx, "create user "+h.user, http.MethodPost, "/api/v1/user", map[string]string{"name": h.user}, &created); err != nil {
			return "", err
		}
		id = created.User.ID
	}
	if id == "" {
		return "", &Error{Op: "look up user " + h.user, Status: http.StatusOK, Message: "the API returned no user ID"}
	}
	h.mu.Lock()
	h.userID = id
	h.mu.Unlock()
	return id, nil
}

// CreateAuthKey mints a key that creates one device with the given tags.
func (h *Headscale) CreateAuthKey(ctx context.Context, tags []string, preauthorized, reusable, ephemeral bool) (string, error) {
	k, err := h.MintAuthKey(ctx, KeyRequest{Tags: tags, Preauthorized: preauthorized, Reusable: reusable, Ephemeral: ephemeral})
	return k.Key, err
}

// MintAuthKey mints a pre-auth key with r's tags, once Headscale's policy
// says the operator owns them (checkTags). Headscale's keys are always
// preauthorized; the description is kept in memory (Headscale has no
// field for it).
func (h *Headscale) MintAuthKey(ctx context.Context, r KeyRequest) (AuthKey, error) {
	policy, err := h.policy(ctx)
	if err != nil {
		return AuthKey{}, err
	}
	if err := h.checkTags(policy, r.Tags); err != nil {
		return AuthKey{}, err
	}
	owner, err := h.ownerID(ctx)
	if err != nil {
		return AuthKey{}, err
	}
	req := map[string]any{"user": owner, "reusable": r.Reusable, "ephemeral": r.Ephemeral,
		"expiration": time.Now().Add(h.expiry).UTC().Format(time.RFC3339), "aclTags": r.Tags}
	var resp struct {
		PreAuthKey hsPreAuthKey `json:"preAuthKey"`
	}
	if err := h.do(ctx, "create auth key", http.MethodPost, "/api/v1/preauthkey", req, &resp); err != nil {
		return AuthKey{}, err
	}
	if resp.PreAuthKey.Key == "" || resp.PreAuthKey.ID == "" {
		return AuthKey{}, &Error{Op: "create auth key", Status: http.StatusOK, Message: "the API returned no key"}
	}
	if r.Description != "" {
		h.mu.Lock()
		h.descriptions[resp.PreAuthKey.ID] = r.Description
		h.mu.Unlock()
	}
	out := h.authKey(resp.PreAuthKey)
	out.Key = resp.PreAuthKey.Key
	return out, nil
}

func (h *Headscale) authKey(k hsPreAuthKey) AuthKey {
	h.mu.Lock()
	desc := h.descriptions[k.ID]
	h.mu.Unlock()
	expired := !k.Expiration.IsZero() && !k.Expiration.After(time.Now())
	return AuthKey{ID: k.ID, Description: desc, Created: k.CreatedAt, Tags: k.ACLTags,
		Invalid: expired || (k.Used && !k.Reusable)}
}

// listKeys lists the owner's pre-auth keys, secrets included (Headscale
// returns them).
func (h *Headscale) listKeys(ctx context.Context) (string, []hsPreAuthKey, error) {
	owner, err := h.ownerID(ctx)
	if err != nil {
		return "", nil, err
	}
	var resp struct {
		PreAuthKeys []hsPreAuthKey `json:"preAuthKeys"`
	}
	err = h.do(ctx, "list auth keys", http.MethodGet, "/api/v1/preauthkey?user="+url.QueryEscape(owner), nil, &resp)
	return owner, resp.PreAuthKeys, err
}

// ListAuthKeys lists the pre-auth keys of the operator's user, without
// their secrets.
func (h *Headscale) ListAuthKeys(ctx context.Context) ([]AuthKey, error) {
	_, keys, err := h.listKeys(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]AuthKey, 0, len(keys))
	for _, k := range keys {
		out = append(out, h.authKey(k))
	}
	return out, nil
}

// RevokeAuthKey expires a pre-auth key by ID (Headscale expires keys by
// their secret, which the list returns); a key that is gone or already
// expired is not an error.
func (h *Headscale) RevokeAuthKey(ctx context.Context, id string) error {
	if id == "" {
		return errors.New("tailnet: revoke auth key: empty key ID")
	}
	owner, keys, err := h.listKeys(ctx)
	if err != nil {
		return err
	}
	i := slices.IndexFunc(keys, func(k hsPreAuthKey) bool { return k.ID == id })
	if i < 0 || !keys[i].Expiration.After(time.Now()) {
		return nil
	}
	return h.do(ctx, "revoke auth key "+id, http.MethodPost, "/api/v1/preauthkey/expire",
		map[string]string{"user": owner, "key": keys[i].Key}, nil)
}

// DeleteDevice deletes a node by its ID (Headscale's stable node IDs are
// its numeric node IDs); one that is gone is not an error.
func (h *Headscale) DeleteDevice(ctx context.Context, id string) error {
	if id == "" {
		return errors.New("tailnet: delete device: empty device ID")
	}
	if _, err := strconv.ParseUint(id, 10, 64); err != nil {
		return &Error{Op: "delete device " + id, Status: http.StatusBadRequest, Message: "a Headscale node ID is a number"}
	}
	err := h.do(ctx, "delete device "+id, http.MethodDelete, "/api/v1/node/"+id, nil, nil)
	var e *Error
	if errors.As(err, &e) && e.Status == http.StatusNotFound {
		return nil
	}
	return err
}

// ListDevices lists Headscale's nodes. Name is the node's given name:
// the API does not tell the MagicDNS base domain.
func (h *Headscale) ListDevices(ctx context.Context) ([]Device, error) {
	var resp struct {
		Nodes []hsNode `json:"nodes"`
	}
	if err := h.do(ctx, "list devices", http.MethodGet, "/api/v1/node", nil, &resp); err != nil {
		return nil, err
	}
	out := make([]Device, 0, len(resp.Nodes))
	for _, n := range resp.Nodes {
		tags := slices.Concat(n.ForcedTags, n.ValidTags)
		slices.Sort(tags)
		out = append(out, Device{ID: n.ID, Name: n.GivenName, Hostname: n.Name, Addresses: n.IPAddresses, Tags: slices.Compact(tags)})
	}
	return out, nil
}

// GetService fails: Headscale has no Tailscale Services.
func (h *Headscale) GetService(context.Context, string) (*Service, error) {
	return nil, unsupportedError(h.ControlName(), FeatureServices, "get Tailscale Service")
}

// PutService fails: Headscale has no Tailscale Services.
func (h *Headscale) PutService(context.Context, Service) error {
	return unsupportedError(h.ControlName(), FeatureServices, "put Tailscale Service")
}

// DeleteService succeeds: there is nothing to delete on Headscale.
func (h *Headscale) DeleteService(context.Context, string) error { return nil }

// ListServices is empty: Headscale has no Tailscale Services.
func (h *Headscale) ListServices(context.Context) ([]Service, error) { return nil, nil }
