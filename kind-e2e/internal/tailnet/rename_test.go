package tailnet

import (
	"context"
	"fmt"
	"testing"
	"time"

	tsapi "tailscale.com/client/tailscale/v2"
	"tailscale.com/ipn"
	"tailscale.com/ipn/store/mem"
	"tailscale.com/tsnet"
)

// A node that reports a new hostname gets the matching MagicDNS name, as
// on Tailscale's control server: what a proxy does when its Service's
// tailscale.com/hostname changes.
func TestDeviceNameFollowsHostname(t *testing.T) {
	tn := startForTest(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var req tsapi.CreateKeyRequest
	req.Capabilities.Devices.Create.Preauthorized = true
	req.Capabilities.Devices.Create.Ephemeral = true
	k, err := client(t, tn, tn.ClientSecret).Keys().CreateAuthKey(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	node := &tsnet.Server{ControlURL: tn.URL, Hostname: "alpha", AuthKey: k.Key, Ephemeral: true,
		Store: new(mem.Store), Dir: t.TempDir(), Logf: func(string, ...any) {}}
	t.Cleanup(func() { _ = node.Close() })
	if _, err := node.Up(ctx); err != nil {
		t.Fatal(err)
	}
	lc, err := node.LocalClient()
	if err != nil {
		t.Fatal(err)
	}
	selfName := func(want string) error {
		var got string
		for {
			st, err := lc.Status(ctx)
			if err == nil && st.Self != nil {
				if got = st.Self.DNSName; got == want {
					return nil
				}
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("self name %q, want %q: %w", got, want, ctx.Err())
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	if err := selfName("alpha.test.ts.net."); err != nil {
		t.Fatal(err)
	}
	if _, err := lc.EditPrefs(ctx, &ipn.MaskedPrefs{Prefs: ipn.Prefs{Hostname: "beta"}, HostnameSet: true}); err != nil {
		t.Fatal(err)
	}
	if err := selfName("beta.test.ts.net."); err != nil {
		t.Fatal(err)
	}
	for _, n := range tn.liveNodes() {
		if n.Name != "beta.test.ts.net." {
			t.Fatalf("control still has a node named %s", n.Name)
		}
	}
}
