package tailnet

import (
	"context"
	"errors"
	"strconv"
	"time"
)

// Observer learns of a backend's API calls (metrics). Observe calls it.
type Observer interface {
	// APICall is told of each call: its operation (a fixed name such as
	// "mint_auth_key") and its error, nil on success.
	APICall(op string, err error)
	// KeysMinted and KeysRevoked are told of auth keys minted, and of keys
	// revoked or expired.
	KeysMinted(n int)
	KeysRevoked(n int)
}

// The operations Observe reports.
const (
	OpCreateAuthKey      = "create_auth_key"
	OpMintAuthKey        = "mint_auth_key"
	OpListAuthKeys       = "list_auth_keys"
	OpRevokeAuthKey      = "revoke_auth_key"
	OpDeleteDevice       = "delete_device"
	OpListDevices        = "list_devices"
	OpGetService         = "get_service"
	OpPutService         = "put_service"
	OpDeleteService      = "delete_service"
	OpListServices       = "list_services"
	OpExpireOrphanedKeys = "expire_orphaned_keys"
)

// StatusCode is the label value of err's HTTP status: the status of an
// *Error that had an answer, else "none" (no answer, or not an API error).
func StatusCode(err error) string {
	var e *Error
	if errors.As(err, &e) && e.Status != 0 {
		return strconv.Itoa(e.Status)
	}
	return "none"
}

// Observe returns b with every call reported to obs. What b implements
// beyond Backend stays visible: FeatureSet answers as b does, and the
// result implements KeySweeper exactly when b does.
func Observe(b Backend, obs Observer) Backend {
	o := &observed{b: b, obs: obs}
	if s, ok := b.(KeySweeper); ok {
		return &observedSweeper{observed: o, s: s}
	}
	return o
}

type observed struct {
	b   Backend
	obs Observer
}

// Unwrap returns the observed backend.
func (o *observed) Unwrap() Backend { return o.b }

// LoginServer is b's.
func (o *observed) LoginServer() string { return o.b.LoginServer() }

// Supports answers as b does.
func (o *observed) Supports(f Feature) bool { return Supports(o.b, f) }

// ControlName is b's, "Tailscale" when b has every feature.
func (o *observed) ControlName() string {
	if fs, ok := o.b.(FeatureSet); ok {
		return fs.ControlName()
	}
	return "Tailscale"
}

// CreateAuthKey calls the backend's and reports the call.
func (o *observed) CreateAuthKey(ctx context.Context, tags []string, preauthorized, reusable, ephemeral bool) (string, error) {
	k, err := o.b.CreateAuthKey(ctx, tags, preauthorized, reusable, ephemeral)
	o.obs.APICall(OpCreateAuthKey, err)
	if err == nil {
		o.obs.KeysMinted(1)
	}
	return k, err
}

// MintAuthKey calls the backend's and reports the call.
func (o *observed) MintAuthKey(ctx context.Context, req KeyRequest) (AuthKey, error) {
	k, err := o.b.MintAuthKey(ctx, req)
	o.obs.APICall(OpMintAuthKey, err)
	if err == nil {
		o.obs.KeysMinted(1)
	}
	return k, err
}

// ListAuthKeys calls the backend's and reports the call.
func (o *observed) ListAuthKeys(ctx context.Context) ([]AuthKey, error) {
	ks, err := o.b.ListAuthKeys(ctx)
	o.obs.APICall(OpListAuthKeys, err)
	return ks, err
}

// RevokeAuthKey calls the backend's and reports the call.
func (o *observed) RevokeAuthKey(ctx context.Context, id string) error {
	err := o.b.RevokeAuthKey(ctx, id)
	o.obs.APICall(OpRevokeAuthKey, err)
	if err == nil {
		o.obs.KeysRevoked(1)
	}
	return err
}

// DeleteDevice calls the backend's and reports the call.
func (o *observed) DeleteDevice(ctx context.Context, id string) error {
	err := o.b.DeleteDevice(ctx, id)
	o.obs.APICall(OpDeleteDevice, err)
	return err
}

// ListDevices calls the backend's and reports the call.
func (o *observed) ListDevices(ctx context.Context) ([]Device, error) {
	ds, err := o.b.ListDevices(ctx)
	o.obs.APICall(OpListDevices, err)
	return ds, err
}

// GetService calls the backend's and reports the call.
func (o *observed) GetService(ctx context.Context, name string) (*Service, error) {
	s, err := o.b.GetService(ctx, name)
	o.obs.APICall(OpGetService, err)
	return s, err
}

// PutService calls the backend's and reports the call.
func (o *observed) PutService(ctx context.Context, s Service) error {
	err := o.b.PutService(ctx, s)
	o.obs.APICall(OpPutService, err)
	return err
}

// DeleteService calls the backend's and reports the call.
func (o *observed) DeleteService(ctx context.Context, name string) error {
	err := o.b.DeleteService(ctx, name)
	o.obs.APICall(OpDeleteService, err)
	return err
}

// ListServices calls the backend's and reports the call.
func (o *observed) ListServices(ctx context.Context) ([]Service, error) {
	ss, err := o.b.ListServices(ctx)
	o.obs.APICall(OpListServices, err)
	return ss, err
}

// observedSweeper is observed for a backend that is a KeySweeper.
type observedSweeper struct {
	*observed
	s KeySweeper
}

// ExpireOrphanedKeys calls the backend's and reports the call.
func (o *observedSweeper) ExpireOrphanedKeys(ctx context.Context, createdBefore time.Time, inUse KeysInUse) ([]AuthKey, error) {
	ks, err := o.s.ExpireOrphanedKeys(ctx, createdBefore, inUse)
	o.obs.APICall(OpExpireOrphanedKeys, err)
	if len(ks) > 0 {
		o.obs.KeysRevoked(len(ks))
	}
	return ks, err
}
