package headscale

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// KeyUser owns the pre-auth keys devcluster mints for its own clients
// (devcluster curl, join); created on first use.
const KeyUser = "devcluster"

// MintKey mints a pre-auth key through Headscale's REST API at serverURL
// with apiKey: owned by KeyUser, tagged with tags, valid for ttl.
func MintKey(ctx context.Context, serverURL, apiKey string, ephemeral bool, tags []string, ttl time.Duration) (string, error) {
	return MintUserKey(ctx, serverURL, apiKey, KeyUser, ephemeral, tags, ttl)
}

// MintUserKey mints a pre-auth key owned by user (created when missing):
// untagged, its devices are that user's, as a user's laptop on a tailnet.
func MintUserKey(ctx context.Context, serverURL, apiKey, user string, ephemeral bool, tags []string, ttl time.Duration) (string, error) {
	c := &client{base: strings.TrimRight(serverURL, "/"), key: apiKey}
	userID, err := c.userID(ctx, user)
	if err != nil {
		return "", err
	}
	var key struct {
		PreAuthKey struct {
			Key string `json:"key"`
		} `json:"preAuthKey"`
	}
	req := map[string]any{"user": userID, "ephemeral": ephemeral, "aclTags": tags,
		"expiration": time.Now().Add(ttl).UTC().Format(time.RFC3339)}
	if err := c.call(ctx, http.MethodPost, "/api/v1/preauthkey", req, &key); err != nil {
		return "", err
	}
	if key.PreAuthKey.Key == "" {
		return "", fmt.Errorf("headscale: create pre-auth key: no key in the answer")
	}
	return key.PreAuthKey.Key, nil
}

// userID returns the ID of the user called name, creating it when missing.
func (c *client) userID(ctx context.Context, name string) (string, error) {
	var users struct {
		Users []struct {
			ID string `json:"id"`
		} `json:"users"`
	}
	if err := c.call(ctx, http.MethodGet, "/api/v1/user?name="+url.QueryEscape(name), nil, &users); err != nil {
		return "", err
	}
	if len(users.Users) > 0 {
		return users.Users[0].ID, nil
	}
	var created struct {
		User struct {
			ID string `json:"id"`
		} `json:"user"`
	}
	if err := c.call(ctx, http.MethodPost, "/api/v1/user", map[string]string{"name": name}, &created); err != nil {
		return "", err
	}
	return created.User.ID, nil
}

// client makes Headscale REST calls with an API key.
type client struct{ base, key string }

func (c *client) call(ctx context.Context, method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+c.key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("headscale %s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return fmt.Errorf("headscale %s %s: %w", method, path, err)
	}
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("headscale %s %s: %s: %s", method, path, resp.Status, strings.TrimSpace(string(raw)))
	}
	return json.Unmarshal(raw, out)
}
