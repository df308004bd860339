package tailnet

import (
	"errors"
	"slices"
	"testing"
)

func TestRegistry(t *testing.T) {
	def, other := &Tailscale{loginServer: "https://a"}, &Tailscale{loginServer: "https://b"}
	r := NewRegistry(def)
	if b, err := r.For(""); err != nil || b != Backend(def) {
		t.Fatalf(`For(""): %v %v`, b, err)
	}
	if _, err := r.For("second"); !errors.Is(err, ErrNoTailnet) {
		t.Fatalf("unknown: %v", err)
	}
	r.SetNotReady("second", "bad secret")
	if _, err := r.For("second"); !errors.Is(err, ErrNotReady) || err.Error() != `tailnet "second": not ready: bad secret` {
		t.Fatalf("not ready: %v", err)
	}
	if len(r.All()) != 1 {
		t.Fatal("a Tailnet that is not ready is among All")
	}
	r.Set("second", other)
	if b, err := r.For("second"); err != nil || b != Backend(other) || !slices.Equal(r.Ready(), []string{"second"}) || len(r.All()) != 2 {
		t.Fatalf("ready: %v %v %v", b, err, r.Ready())
	}
	r.Remove("second")
	if _, err := r.For("second"); !errors.Is(err, ErrNoTailnet) {
		t.Fatalf("removed: %v", err)
	}
}
