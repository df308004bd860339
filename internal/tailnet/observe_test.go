package tailnet_test

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/tailplane/tailplane/internal/tailnet"
)

type recorder struct {
	calls           []string
	minted, revoked int
}

func (r *recorder) APICall(op string, err error) {
	r.calls = append(r.calls, op+" "+tailnet.StatusCode(err))
}
func (r *recorder) KeysMinted(n int)  { r.minted += n }
func (r *recorder) KeysRevoked(n int) { r.revoked += n }

// fakeBackend answers every call; revoke fails with 401.
type fakeBackend struct{ tailnet.Backend }

func (fakeBackend) LoginServer() string { return "https://control.example" }
func (fakeBackend) MintAuthKey(context.Context, tailnet.KeyRequest) (tailnet.AuthKey, error) {
	return tailnet.AuthKey{ID: "k1", Key: "secret"}, nil
}
func (fakeBackend) RevokeAuthKey(context.Context, string) error {
	return &tailnet.Error{Op: "revoke auth key k1", Status: http.StatusUnauthorized, Message: "no"}
}
func (fakeBackend) ListDevices(context.Context) ([]tailnet.Device, error) {
	return nil, errors.New("dial tcp: refused")
}

type fakeSweeper struct{ fakeBackend }

func (fakeSweeper) Supports(f tailnet.Feature) bool { return f != tailnet.FeatureServices }
func (fakeSweeper) ControlName() string             { return "Headscale" }
func (fakeSweeper) ExpireOrphanedKeys(context.Context, time.Time, tailnet.KeysInUse) ([]tailnet.AuthKey, error) {
	return []tailnet.AuthKey{{ID: "a"}, {ID: "b"}}, nil
}

func TestObserve(t *testing.T) {
	ctx := context.Background()
	r := &recorder{}
	b := tailnet.Observe(fakeBackend{}, r)
	if _, ok := b.(tailnet.KeySweeper); ok {
		t.Error("observed backend is a KeySweeper; the backend is not")
	}
	if !tailnet.Supports(b, tailnet.FeatureServices) {
		t.Error("observed Tailscale backend lacks Tailscale Services")
	}
	if _, err := b.MintAuthKey(ctx, tailnet.KeyRequest{}); err != nil {
		t.Fatal(err)
	}
	if err := b.RevokeAuthKey(ctx, "k1"); !tailnet.IsUnauthorized(err) {
		t.Fatalf("revoke: %v, want the backend's 401", err)
	}
	_, _ = b.ListDevices(ctx)
	want := []string{"mint_auth_key none", "revoke_auth_key 401", "list_devices none"}
	if len(r.calls) != len(want) {
		t.Fatalf("calls = %q, want %q", r.calls, want)
	}
	for i := range want {
		if r.calls[i] != want[i] {
			t.Errorf("calls[%d] = %q, want %q", i, r.calls[i], want[i])
		}
	}
	if r.minted != 1 || r.revoked != 0 {
		t.Errorf("minted, revoked = %d, %d; want 1, 0", r.minted, r.revoked)
	}

	r = &recorder{}
	s := tailnet.Observe(fakeSweeper{}, r)
	sw, ok := s.(tailnet.KeySweeper)
	if !ok {
		t.Fatal("observed sweeper is not a KeySweeper")
	}
	if tailnet.Supports(s, tailnet.FeatureServices) || tailnet.Unsupported(s, "x", tailnet.FeatureServices) == "" {
		t.Error("observed Headscale backend claims Tailscale Services")
	}
	if _, err := sw.ExpireOrphanedKeys(ctx, time.Now(), nil); err != nil {
		t.Fatal(err)
	}
	if r.revoked != 2 || len(r.calls) != 1 || r.calls[0] != "expire_orphaned_keys none" {
		t.Errorf("after the sweep: calls %q, revoked %d; want one expire call and 2 revoked", r.calls, r.revoked)
	}
}
