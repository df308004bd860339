package tailnet

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"golang.org/x/oauth2"
	tsapi "tailscale.com/client/tailscale/v2"
)

// userAgent identifies the operator to the API.
const userAgent = "tailplane-operator"

// Options configure a Tailscale API backend.
type Options struct {
	// LoginServer is the control server URL; the API is reached at the same
	// base URL. Empty means DefaultLoginServer.
	LoginServer string
	// ClientID and ClientSecret are the OAuth client's credentials.
	ClientID, ClientSecret string
	// IDToken, instead of ClientSecret, makes the client a workload
	// identity federation client: each API token is had for a fresh
	// identity token (a JWT of an issuer the client trusts, such as a
	// projected ServiceAccount token) at /api/v2/oauth/token-exchange.
	IDToken func() (string, error)
	// HTTPClient is the base client (timeouts, transport); nil means one
	// with a 30 s timeout.
	HTTPClient *http.Client
}

// Tailscale is the Backend on the Tailscale API (v2), authenticated with
// OAuth client credentials or workload identity federation.
type Tailscale struct {
	client      *tsapi.Client
	loginServer string
}

var _ Backend = (*Tailscale)(nil)

// NewTailscale returns a backend for the given options. It does not call the
// API; use Verify to check the credentials.
func NewTailscale(opts Options) (*Tailscale, error) {
	var auth tsapi.Auth
	switch {
	case opts.ClientID == "":
		return nil, errors.New("tailnet: the OAuth client ID is required")
	case opts.ClientSecret != "" && opts.IDToken != nil:
		return nil, errors.New("tailnet: an OAuth client has a secret or identity tokens (workload identity federation), not both")
	case opts.ClientSecret != "":
		auth = &tsapi.OAuth{ClientID: opts.ClientID, ClientSecret: opts.ClientSecret}
	case opts.IDToken != nil:
		auth = &tsapi.IdentityFederation{ClientID: opts.ClientID, IDTokenFunc: opts.IDToken}
	default:
		return nil, errors.New("tailnet: the OAuth client's secret or, for workload identity federation, identity tokens are required")
	}
	login := NormalizeLoginServer(opts.LoginServer)
	base, err := url.Parse(login)
	if err != nil || base.Scheme == "" || base.Host == "" {
		return nil, fmt.Errorf("tailnet: login server %q is not an absolute URL", opts.LoginServer)
	}
	httpClient := opts.HTTPClient
	if httpClient == nil {
		httpClient = &http.Client{Timeout: 30 * time.Second}
	}
	return &Tailscale{
		loginServer: login,
		client: &tsapi.Client{
			BaseURL:   base,
			UserAgent: userAgent,
			HTTP:      httpClient,
			Auth:      auth,
		},
	}, nil
}

// NewTailscaleFromFiles reads the OAuth client ID and secret from files (the
// official CLIENT_ID_FILE / CLIENT_SECRET_FILE), trimming surrounding
// whitespace, and returns a backend for loginServer.
func NewTailscaleFromFiles(loginServer, idFile, secretFile string) (*Tailscale, error) {
	id, err := readCredential(idFile, "client ID")
	if err != nil {
		return nil, err
	}
	secret, err := readCredential(secretFile, "client secret")
	if err != nil {
		return nil, err
	}
	return NewTailscale(Options{LoginServer: loginServer, ClientID: id, ClientSecret: secret})
}

// NewTailscaleFederated returns a backend for loginServer whose OAuth
// client clientID is a workload identity federation client: its identity
// token is read from tokenFile each time one is needed (a projected
// ServiceAccount token, which the kubelet renews in place).
func NewTailscaleFederated(loginServer, clientID, tokenFile string) (*Tailscale, error) {
	return NewTailscale(Options{LoginServer: loginServer, ClientID: clientID, IDToken: func() (string, error) {
		return readCredential(tokenFile, "identity token")
	}})
}

func readCredential(path, what string) (string, error) {
	if path == "" {
		return "", fmt.Errorf("tailnet: no file given for the OAuth %s", what)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("tailnet: read OAuth %s: %w", what, err)
	}
	v := strings.TrimSpace(string(b))
	if v == "" {
		return "", fmt.Errorf("tailnet: OAuth %s file %s is empty", what, path)
	}
	return v, nil
}

// LoginServer returns the control server URL, without a trailing slash.
func (t *Tailscale) LoginServer() string { return t.loginServer }

// CreateAuthKey mints a key that creates one device with the given tags.
func (t *Tailscale) CreateAuthKey(ctx context.Context, tags []string, preauthorized, reusable, ephemeral bool) (string, error) {
	k, err := t.MintAuthKey(ctx, KeyRequest{Tags: tags, Preauthorized: preauthorized, Reusable: reusable, Ephemeral: ephemeral})
	return k.Key, err
}

// MintAuthKey mints a key as asked.
func (t *Tailscale) MintAuthKey(ctx context.Context, r KeyRequest) (AuthKey, error) {
	if len(r.Description) > MaxKeyDescription {
		return AuthKey{}, fmt.Errorf("tailnet: create auth key: description %q is longer than %d characters", r.Description, MaxKeyDescription)
	}
	var req tsapi.CreateKeyRequest
	req.Description = r.Description
	req.Capabilities.Devices.Create.Tags = r.Tags
	req.Capabilities.Devices.Create.Preauthorized = r.Preauthorized
	req.Capabilities.Devices.Create.Reusable = r.Reusable
	req.Capabilities.Devices.Create.Ephemeral = r.Ephemeral
	key, err := t.client.Keys().CreateAuthKey(ctx, req)
	if err != nil {
		return AuthKey{}, apiError("create auth key", err)
	}
	if key.Key == "" {
		return AuthKey{}, &Error{Op: "create auth key", Status: http.StatusOK, Message: "the API returned no key"}
	}
	out := authKey(key)
	out.Key = key.Key
	return out, nil
}

// ListAuthKeys lists the auth keys of the caller (the OAuth client): all
// the keys it minted, with no scope beyond Auth Keys (listing other users'
// keys too would need more). An API that lists only key IDs (the client
// library documents that it may) is asked for each key's details.
func (t *Tailscale) ListAuthKeys(ctx context.Context) ([]AuthKey, error) {
	keys, err := t.client.Keys().List(ctx, false)
	if err != nil {
		return nil, apiError("list auth keys", err)
	}
	out := make([]AuthKey, 0, len(keys))
	for _, k := range keys {
		if k.Created.IsZero() && k.KeyType == "" && k.ID != "" {
			full, err := t.client.Keys().Get(ctx, k.ID)
			if tsapi.IsNotFound(err) {
				continue // revoked or expired since the list
			}
			if err != nil {
				return nil, apiError("get auth key "+k.ID, err)
			}
			k = *full
		}
		if k.KeyType != "" && k.KeyType != "auth" {
			continue
		}
		out = append(out, authKey(&k))
	}
	return out, nil
}

func authKey(k *tsapi.Key) AuthKey {
	return AuthKey{ID: k.ID, Description: k.Description, Created: k.Created, Invalid: k.Invalid || !k.Revoked.IsZero(),
		Tags: k.Capabilities.Devices.Create.Tags}
}

// RevokeAuthKey revokes a key; one that is already gone is not an error.
func (t *Tailscale) RevokeAuthKey(ctx context.Context, id string) error {
	if id == "" {
		return errors.New("tailnet: revoke auth key: empty key ID")
	}
	err := t.client.Keys().Delete(ctx, id)
	if err != nil && !tsapi.IsNotFound(err) {
		return apiError("revoke auth key "+id, err)
	}
	return nil
}

// DeleteDevice deletes a device; one that is already gone is not an error.
func (t *Tailscale) DeleteDevice(ctx context.Context, id string) error {
	if id == "" {
		return errors.New("tailnet: delete device: empty device ID")
	}
	err := t.client.Devices().Delete(ctx, id)
	if err != nil && !tsapi.IsNotFound(err) {
		return apiError("delete device "+id, err)
	}
	return nil
}

// ListDevices lists the tailnet's devices.
func (t *Tailscale) ListDevices(ctx context.Context) ([]Device, error) {
	devs, err := t.client.Devices().List(ctx)
	if err != nil {
		return nil, apiError("list devices", err)
	}
	out := make([]Device, 0, len(devs))
	for _, d := range devs {
		id := d.NodeID
		if id == "" {
			id = d.ID
		}
		out = append(out, Device{ID: id, Name: strings.TrimSuffix(d.Name, "."), Hostname: d.Hostname, Addresses: d.Addresses, Tags: d.Tags})
	}
	return out, nil
}

// Verify checks that the credentials are accepted and the devices of the
// tailnet can be read: the operator's startup check.
func (t *Tailscale) Verify(ctx context.Context) error {
	_, err := t.ListDevices(ctx)
	return err
}

// apiError turns what the client library returned into an *Error that keeps
// the API's message: API answers, OAuth token refusals, and transport
// failures.
func apiError(op string, err error) error {
	var api tsapi.APIError
	if errors.As(err, &api) {
		msg := api.Message
		if msg == "" {
			msg = http.StatusText(api.Status)
		}
		return &Error{Op: op, Status: api.Status, Message: msg, Err: err}
	}
	var tokenErr *oauth2.RetrieveError
	if errors.As(err, &tokenErr) {
		msg := tokenErr.ErrorDescription
		if msg == "" {
			msg = tokenErr.ErrorCode
		}
		if msg == "" {
			msg = strings.TrimSpace(string(tokenErr.Body))
		}
		status := 0
		if tokenErr.Response != nil {
			status = tokenErr.Response.StatusCode
		}
		return &Error{Op: op, Status: status, Message: "OAuth token refused: " + msg, Err: err}
	}
	var urlErr *url.Error
	if errors.As(err, &urlErr) {
		return &Error{Op: op, Message: urlErr.Err.Error(), Err: err}
	}
	// Anything else: an answer the library could not parse (e.g. an HTML
	// error page from a proxy in between). Its status is unknown, so it is
	// treated like a network failure: retried.
	return &Error{Op: op, Message: "unreadable answer: " + err.Error(), Err: err}
}
