package tailnet

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// DefaultLoginServer is the control server used when no login server is set
// (the official operator's default); its API is served at the same address.
const DefaultLoginServer = "https://controlplane.tailscale.com"

// Backend is what the operator asks of a tailnet's control plane.
type Backend interface {
	// CreateAuthKey mints an auth key for one new device with the given
	// ACL tags. Proxies use preauthorized, non-reusable, non-ephemeral
	// keys, as the official operator does.
	CreateAuthKey(ctx context.Context, tags []string, preauthorized, reusable, ephemeral bool) (string, error)
	// MintAuthKey mints an auth key as asked and returns it with its ID.
	MintAuthKey(ctx context.Context, req KeyRequest) (AuthKey, error)
	// ListAuthKeys lists the auth keys the caller minted (secrets left
	// out), with their descriptions, creation times and whether they still
	// work.
	ListAuthKeys(ctx context.Context) ([]AuthKey, error)
	// RevokeAuthKey revokes an auth key by ID. A key that does not exist
	// (404) counts as revoked.
	RevokeAuthKey(ctx context.Context, id string) error
	// DeleteDevice removes a device by its stable node ID. A device that
	// does not exist (404) counts as deleted.
	DeleteDevice(ctx context.Context, id string) error
	// ListDevices lists the tailnet's devices.
	ListDevices(ctx context.Context) ([]Device, error)
	// LoginServer is the control server URL proxies must log in to.
	LoginServer() string
	// GetService returns a Tailscale Service, nil when it does not exist.
	GetService(ctx context.Context, name string) (*Service, error)
	// PutService creates or updates a Tailscale Service.
	PutService(ctx context.Context, s Service) error
	// DeleteService deletes a Tailscale Service (404 counts as deleted).
	DeleteService(ctx context.Context, name string) error
	// ListServices lists the tailnet's Tailscale Services.
	ListServices(ctx context.Context) ([]Service, error)
}

// KeySweeper is implemented by backends whose auth keys carry no
// description (Headscale), so that a key minted by an operator that died
// before recording it cannot be found by its owner's description: the
// backend finds such keys by what refers to them instead.
type KeySweeper interface {
	// ExpireOrphanedKeys expires the operator's keys that can still create
	// a device, carry ACL tags (the operator mints no other kind), were
	// created before createdBefore, and whose secret inUse does not
	// claim. inUse is asked after the keys were listed, so that a key
	// recorded meanwhile is seen, and only when there is a candidate. It
	// returns the keys it expired, without their secrets.
	ExpireOrphanedKeys(ctx context.Context, createdBefore time.Time, inUse KeysInUse) ([]AuthKey, error)
}

// KeysInUse returns a test of whether an auth key's secret is recorded
// anywhere a proxy could still use it.
type KeysInUse func(ctx context.Context) (func(secret string) bool, error)

// KeyRequest describes an auth key to mint.
type KeyRequest struct {
	// Tags are the ACL tags of the device the key creates.
	Tags []string
	// Preauthorized, Reusable and Ephemeral are the key's capabilities.
	Preauthorized, Reusable, Ephemeral bool
	// Description is shown in the admin console and returned by
	// ListAuthKeys: at most MaxKeyDescription letters, digits, spaces and
	// dashes. The operator names the key's owner in it, so that a key whose
	// owner never learnt of it (a crash right after minting) can be found.
	Description string
}

// MaxKeyDescription is the API's limit on a key description.
const MaxKeyDescription = 50

// AuthKey is an auth key as the API reports it.
type AuthKey struct {
	// ID identifies the key in the API (list, revoke).
	ID string
	// Key is the secret; set only in MintAuthKey's answer.
	Key string
	// Description is what the key was minted with.
	Description string
	// Created is when it was minted.
	Created time.Time
	// Invalid is true once the key can no longer be used: revoked,
	// expired, or (single-use keys) used.
	Invalid bool
	// Tags are the tags of the devices it creates.
	Tags []string
}

// Device is one tailnet device as the API reports it.
type Device struct {
	// ID is the stable node ID (what proxies write as device_id).
	ID string
	// Name is the MagicDNS name, without a trailing dot.
	Name string
	// Hostname is the device's own hostname.
	Hostname string
	// Addresses are its tailnet IPs.
	Addresses []string
	// Tags are its ACL tags.
	Tags []string
}

// Error is a failed API call. Message is the API's own text (or, when the
// API sent none, a short description of what came back).
type Error struct {
	// Op is what was attempted, e.g. "create auth key".
	Op string
	// Status is the HTTP status; 0 when no response came back.
	Status int
	// Message is the API's message.
	Message string
	// Err is the underlying error.
	Err error
}

func (e *Error) Error() string {
	if e.Status == 0 {
		return fmt.Sprintf("tailnet API: %s: %s", e.Op, e.Message)
	}
	return fmt.Sprintf("tailnet API: %s: %s (HTTP %d)", e.Op, e.Message, e.Status)
}

func (e *Error) Unwrap() error { return e.Err }

// Temporary reports whether err is worth retrying later: rate limits and
// quotas (429), server errors (5xx), and network errors with no response.
// Rejected credentials, refused tags and other 4xx answers are not: they
// need someone to fix the configuration.
func Temporary(err error) bool {
	var e *Error
	if !errors.As(err, &e) {
		return false
	}
	return e.Status == 0 || e.Status == http.StatusTooManyRequests || e.Status >= 500
}

// IsUnauthorized reports whether the API refused the credentials.
func IsUnauthorized(err error) bool {
	var e *Error
	return errors.As(err, &e) && (e.Status == http.StatusUnauthorized || e.Status == http.StatusForbidden)
}

// NormalizeLoginServer trims spaces and trailing slashes; empty means
// DefaultLoginServer.
func NormalizeLoginServer(s string) string {
	s = strings.TrimRight(strings.TrimSpace(s), "/")
	if s == "" {
		return DefaultLoginServer
	}
	return s
}
