package host_test

import (
	"context"
	"testing"

	"github.com/tailplane/tailplane/plugins/host"
	"github.com/tailplane/tailplane/proxy/route"
)

// A guest sees only the environment its config declares, and no files or
// sockets, even though Go guests import WASI.
func TestNoAmbientWASIAccess(t *testing.T) {
	e, _ := newEngine(t)
	p := misbehaving(t, e, "ambient", host.Config{Env: map[string]string{"GREETING": "hi"}})
	d, err := p.Route(context.Background(), request("/ambient"), route.Decision{})
	if err != nil {
		t.Fatal(err)
	}
	h := d.SetRequestHeaders
	if h.Get("X-Env-Greeting") != "hi" || h.Get("X-Env-Home") != "" {
		t.Errorf("env: GREETING=%q HOME=%q; want only the declared variable", h.Get("X-Env-Greeting"), h.Get("X-Env-Home"))
	}
	for _, k := range []string{"X-File", "X-Dir", "X-Net"} {
		if h.Get(k) != "error" {
			t.Errorf("%s = %q: the guest reached the host", k, h.Get(k))
		}
	}
}
