package tailnet

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"
)

// Headscale defaults.
const (
	// DefaultHeadscaleUser owns the pre-auth keys the operator mints: a
	// Headscale pre-auth key always belongs to a user, even when the
	// devices it creates are tagged.
	DefaultHeadscaleUser = "tailplane"
	// DefaultHeadscaleKeyExpiry is how long a minted pre-auth key works
	// (Tailscale's default auth key expiry). Headscale needs one: a key
	// minted without an expiration is expired at once.
	DefaultHeadscaleKeyExpiry = 90 * 24 * time.Hour
)

// HeadscaleOptions configure a Headscale backend.
type HeadscaleOptions struct {
	// URL is the Headscale server (its server_url): proxies log in there
	// and its REST API is served under /api/v1.
	URL string
	// APIKey is a Headscale API key (headscale apikeys create), sent as a
	// Bearer token.
	APIKey string
	// User owns the minted pre-auth keys; it is created when missing.
	// Empty means DefaultHeadscaleUser.
	User string
	// KeyExpiry is the lifetime of minted keys; 0 means
	// DefaultHeadscaleKeyExpiry.
	KeyExpiry time.Duration
	// HTTPClient is the base client; nil means one with a 30 s timeout.
	HTTPClient *http.Client
}

// Headscale is the Backend on Headscale's REST API (v0.27): pre-auth keys
// with ACL tags (devices made with them are tagged, owned by no user),
// nodes listed and deleted by their numeric ID, which is also the stable
// node ID their clients report. Headscale has no Tailscale Services and
// no Funnel, and issues no certificates; Supports says so, and the Service calls fail
// with ErrUnsupported.
//
// Headscale keys carry no description, so the descriptions the operator
// mints keys with are kept in memory: keys minted before an operator
// restart are listed without one. Those never used are found by
// ExpireOrphanedKeys (KeySweeper) instead: no Secret holds them.
type Headscale struct {
	base   string
	apiKey string
	user   string
	expiry time.Duration
	http   *http.Client

	mu           sync.Mutex
	userID       string            // the key owner's ID, once looked up
	descriptions map[string]string // key ID -> description
}

var (
	_ Backend    = (*Headscale)(nil)
	_ FeatureSet = (*Headscale)(nil)
	_ KeySweeper = (*Headscale)(nil)
)

// NewHeadscale returns a backend for opts. It does not call the API; use
// Verify to check the key.
func NewHeadscale(opts HeadscaleOptions) (*Headscale, error) {
	base := strings.TrimRight(strings.TrimSpace(opts.URL), "/")
	u, err := url.Parse(base)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return nil, fmt.Errorf("tailnet: Headscale URL %q is not an absolute URL", opts.URL)
	}
	if strings.TrimSpace(opts.APIKey) == "" {
		return nil, errors.New("tailnet: a Headscale API key is required")
	}
	h := &Headscale{base: base, apiKey: strings.TrimSpace(opts.APIKey), user: opts.User, expiry: opts.KeyExpiry,
		http: opts.HTTPClient, descriptions: map[string]string{}}
	if h.user == "" {
		h.user = DefaultHeadscaleUser
	}
	if h.expiry <= 0 {
		h.expiry = DefaultHeadscaleKeyExpiry
	}
	if h.http == nil {
		h.http = &http.Client{Timeout: 30 * time.Second}
	}
	return h, nil
}

// NewHeadscaleFromFile reads the API key from a file (a mounted Secret),
// trimming surrounding whitespace.
func NewHeadscaleFromFile(serverURL, apiKeyFile, user string) (*Headscale, error) {
	if apiKeyFile == "" {
		return nil, errors.New("tailnet: no file given for the Headscale API key")
	}
	b, err := os.ReadFile(apiKeyFile)
	if err != nil {
		return nil, fmt.Errorf("tailnet: read the Headscale API key: %w", err)
	}
	if strings.TrimSpace(string(b)) == "" {
		return nil, fmt.Errorf("tailnet: Headscale API key file %s is empty", apiKeyFile)
	}
	return NewHeadscale(HeadscaleOptions{URL: serverURL, APIKey: string(b), User: user})
}

// LoginServer is the Headscale URL.
func (h *Headscale) LoginServer() string { return h.base }

// ControlName is "Headscale".
func (h *Headscale) ControlName() string { return "Headscale" }

// Supports is false for Tailscale Services, ts.net certificates and
// Funnel.
func (h *Headscale) Supports(f Feature) bool {
	return f != FeatureServices && f != FeatureCertificates && f != FeatureFunnel
}

// Verify checks that the API key is accepted, that the nodes can be read
// and that the keys' owner exists (it is created if not): the operator's
// startup check.
func (h *Headscale) Verify(ctx context.Context) error {
	if _, err := h.ListDevices(ctx); err != nil {
		return err
	}
	_, err := h.ownerID(ctx)
	return err
}

// hsError is grpc-gateway's error body.
type hsError struct {
	Message string `json:"message"`
}

// do sends one API call; body (if not nil) is sent as JSON and the answer
// decoded into out (if not nil). A non-2xx answer is an *Error with the
// server's message.
func (h *Headscale) do(ctx context.Context, op, method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return fmt.Errorf("tailnet: %s: %w", op, err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, h.base+path, rd)
	if err != nil {
		return fmt.Errorf("tailnet: %s: %w", op, err)
	}
	req.Header.Set("Authorization", "Bearer "+h.apiKey)
	req.Header.Set("User-Agent", userAgent)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := h.http.Do(req)
	if err != nil {
		var urlErr *url.Error
		if errors.As(err, &urlErr) {
			err = urlErr.Err // its text repeats the URL, already known
		}
		return &Error{Op: op, Message: err.Error(), Err: err}
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return &Error{Op: op, Message: "reading the answer: " + err.Error(), Err: err}
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		var e hsError
		msg := strings.TrimSpace(string(raw))
		if json.Unmarshal(raw, &e) == nil && e.Message != "" {
			msg = e.Message
		}
		if msg == "" {
			msg = http.StatusText(resp.StatusCode)
		}
		return &Error{Op: op, Status: resp.StatusCode, Message: msg}
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			return &Error{Op: op, Message: "unreadable answer: " + err.Error(), Err: err}
		}
	}
	return nil
}
