package tailnet

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
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
	// DeleteDevice removes a device by its stable node ID. A device that
	// does not exist (404) counts as deleted.
	DeleteDevice(ctx context.Context, id string) error
	// ListDevices lists the tailnet's devices.
	ListDevices(ctx context.Context) ([]Device, error)
	// LoginServer is the control server URL proxies must log in to.
	LoginServer() string
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
