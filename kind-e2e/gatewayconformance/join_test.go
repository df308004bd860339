//go:build conformance

package gatewayconformance

import (
	"context"
	"net/url"
	"testing"
	"time"

	tsapi "tailscale.com/client/tailscale/v2"
	"tailscale.com/ipn/store/mem"
	"tailscale.com/net/netns"
	"tailscale.com/tsnet"
)

// joinTailnet joins devcluster's tailnet with an ephemeral tsnet node, as
// the operator suite's clients do: an auth key minted through the tailnet's
// API with devcluster's OAuth client. The Gateways' addresses are tailnet
// addresses, which only a tailnet node reaches.
func joinTailnet(ctx context.Context, t *testing.T, c *cluster) *tsnet.Server {
	t.Helper()
	env, err := c.env()
	if err != nil {
		t.Fatal(err)
	}
	base, err := url.Parse(env["TS_API_URL"])
	if err != nil {
		t.Fatalf("TS_API_URL: %v", err)
	}
	api := &tsapi.Client{BaseURL: base, Tailnet: "-", Auth: &tsapi.OAuth{ClientID: env["TS_API_CLIENT_ID"], ClientSecret: env["TS_API_CLIENT_SECRET"]}}
	var req tsapi.CreateKeyRequest
	req.Description, req.ExpirySeconds = "gateway conformance client", 3600
	req.Capabilities.Devices.Create.Ephemeral = true
	req.Capabilities.Devices.Create.Preauthorized = true
	key, err := api.Keys().CreateAuthKey(ctx, req)
	if err != nil {
		t.Fatalf("mint an auth key: %v", err)
	}
	// devcluster's tailnet is on this host's addresses: no socket marks.
	netns.SetEnabled(false)
	node := &tsnet.Server{
		ControlURL: env["TS_CONTROL_URL"], Hostname: "gateway-conformance", AuthKey: key.Key, Ephemeral: true,
		Store: new(mem.Store), Dir: t.TempDir(), Logf: func(string, ...any) {}, UserLogf: t.Logf,
	}
	upCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if _, err := node.Up(upCtx); err != nil {
		t.Fatalf("join devcluster's tailnet: %v", err)
	}
	t.Cleanup(func() { _ = node.Close() })
	return node
}
