//go:build headscale

// These tests run the Headscale backend against a real Headscale v0.27.1
// (devcluster tailnet --control headscale, with the headscale binary of go
// tool task test:headscale in TAILPLANE_TEST_ASSETS). They are built only
// with -tags headscale (go tool task e2e:headscale), so that go
// tool task test does not need headscale's long cold build.
package tailnet_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"tailscale.com/envknob"
	"tailscale.com/net/netns"
	"tailscale.com/tsnet"

	"github.com/tailplane/tailplane/internal/headscaletest"
	"github.com/tailplane/tailplane/internal/tailnet"
	"github.com/tailplane/tailplane/internal/testpoll"
)

// realHeadscale starts a real Headscale and returns its tailnet.env.
func realHeadscale(t *testing.T) map[string]string { return headscaletest.Start(t) }

func headscaleBackend(t *testing.T, env map[string]string) *tailnet.Headscale {
	t.Helper()
	b, err := tailnet.NewHeadscale(tailnet.HeadscaleOptions{URL: env["HEADSCALE_URL"] + "/", APIKey: env["HEADSCALE_API_KEY"]})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// joinNode brings a tsnet node up on the tailnet with key and returns its
// stable node ID as the node itself reports it.
func joinNode(t *testing.T, ctx context.Context, env map[string]string, hostname, key string) string {
	t.Helper()
	netns.SetEnabled(false)
	envknob.SetNoLogsNoSupport()
	node := &tsnet.Server{ControlURL: env["TS_CONTROL_URL"], Hostname: hostname, AuthKey: key,
		Dir: t.TempDir(), Logf: func(string, ...any) {}}
	st, err := node.Up(ctx)
	if err != nil {
		t.Fatalf("join Headscale: %v", err)
	}
	t.Cleanup(func() { node.Close() })
	return string(st.Self.ID)
}

// The backend against a real Headscale: the startup check (which creates
// the keys' owner), a refused API key, tagged pre-auth keys minted, listed
// with their description and revoked (twice, and an unknown one, without
// error), a device made with a key listed with the key's tags under the ID
// its client reports, and deleted (twice without error); the key it used
// is listed as spent. Tailscale Services are refused as unsupported.
func TestHeadscaleBackendAgainstHeadscale(t *testing.T) {
	env := realHeadscale(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	b := headscaleBackend(t, env)
	if err := b.Verify(ctx); err != nil {
		t.Fatalf("Verify: %v", err)
	}
	if b.LoginServer() != env["HEADSCALE_URL"] {
		t.Fatalf("login server %q, want %q", b.LoginServer(), env["HEADSCALE_URL"])
	}
	bad, _ := tailnet.NewHeadscale(tailnet.HeadscaleOptions{URL: env["HEADSCALE_URL"], APIKey: "hskey-api-wrong"})
	if err := bad.Verify(ctx); !tailnet.IsUnauthorized(err) {
		t.Fatalf("a wrong API key: %v, want unauthorized", err)
	}

	unused, err := b.MintAuthKey(ctx, tailnet.KeyRequest{Tags: []string{"tag:k8s"}, Preauthorized: true, Description: "tailplane ts-unused-0"})
	if err != nil {
		t.Fatalf("mint: %v", err)
	}
	keys, err := b.ListAuthKeys(ctx)
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(keys, func(k tailnet.AuthKey) bool { return k.ID == unused.ID })
	if i < 0 || keys[i].Invalid || keys[i].Description != "tailplane ts-unused-0" || !slices.Equal(keys[i].Tags, []string{"tag:k8s"}) || keys[i].Key != "" {
		t.Fatalf("listed %+v, want %+v valid with its tags and description, no secret", keys, unused)
	}
	for range 2 {
		if err := b.RevokeAuthKey(ctx, unused.ID); err != nil {
			t.Fatalf("revoke: %v", err)
		}
	}
	if err := b.RevokeAuthKey(ctx, "999999"); err != nil {
		t.Fatalf("revoke an unknown key: %v", err)
	}
	if keys, _ = b.ListAuthKeys(ctx); !keys[slices.IndexFunc(keys, func(k tailnet.AuthKey) bool { return k.ID == unused.ID })].Invalid {
		t.Fatalf("revoked key still valid: %+v", keys)
	}

	used, err := b.MintAuthKey(ctx, tailnet.KeyRequest{Tags: []string{"tag:k8s"}, Preauthorized: true, Description: "tailplane ts-web-0"})
	if err != nil {
		t.Fatal(err)
	}
	id := joinNode(t, ctx, env, "ts-web", used.Key)
	devs, err := b.ListDevices(ctx)
	if err != nil {
		t.Fatal(err)
	}
	d := slices.IndexFunc(devs, func(d tailnet.Device) bool { return d.ID == id })
	if d < 0 || devs[d].Hostname != "ts-web" || !slices.Equal(devs[d].Tags, []string{"tag:k8s"}) || len(devs[d].Addresses) == 0 {
		t.Fatalf("devices %+v: want %s (ts-web, tag:k8s, with addresses)", devs, id)
	}
	if keys, _ = b.ListAuthKeys(ctx); !keys[slices.IndexFunc(keys, func(k tailnet.AuthKey) bool { return k.ID == used.ID })].Invalid {
		t.Fatalf("a spent single-use key is listed as valid: %+v", keys)
	}
	for range 2 {
		if err := b.DeleteDevice(ctx, id); err != nil {
			t.Fatalf("delete device: %v", err)
		}
	}
	testpoll.Until(t, 30*time.Second, "device gone", func() error {
		devs, err := b.ListDevices(ctx)
		if err != nil {
			return err
		}
		if slices.ContainsFunc(devs, func(d tailnet.Device) bool { return d.ID == id }) {
			return fmt.Errorf("still listed: %+v", devs)
		}
		return nil
	})

	if tailnet.Supports(b, tailnet.FeatureServices) || tailnet.Supports(b, tailnet.FeatureCertificates) {
		t.Fatal("Headscale claims Tailscale Services or certificates")
	}
	if _, err := b.GetService(ctx, "svc:web"); !errors.Is(err, tailnet.ErrUnsupported) {
		t.Fatalf("GetService: %v, want ErrUnsupported", err)
	}
	var e *tailnet.Error
	if err := b.DeleteDevice(ctx, "nNotANumber"); !errors.As(err, &e) || e.Status != http.StatusBadRequest {
		t.Fatalf("a Tailscale-style ID: %v", err)
	}
}

// Keys an operator minted and died before recording: ExpireOrphanedKeys
// expires a tagged, unused key no Secret holds and that is older than the
// cut-off, and leaves alone the key a Secret holds, an untagged key (not
// the operator's kind), a key younger than the cut-off (without even asking
// what is in use), and keys of another Headscale user.
func TestHeadscaleExpiresOrphanedKeys(t *testing.T) {
	env := realHeadscale(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// The operator that died: its key descriptions died with it.
	dead := headscaleBackend(t, env)
	mint := func(b *tailnet.Headscale, tags ...string) tailnet.AuthKey {
		k, err := b.MintAuthKey(ctx, tailnet.KeyRequest{Tags: tags, Preauthorized: true, Description: "tailplane ts-web-abcd1234-0"})
		if err != nil {
			t.Fatalf("mint: %v", err)
		}
		return k
	}
	orphan, recorded, untagged := mint(dead, "tag:k8s"), mint(dead, "tag:k8s"), mint(dead)
	other, err := tailnet.NewHeadscale(tailnet.HeadscaleOptions{URL: env["HEADSCALE_URL"], APIKey: env["HEADSCALE_API_KEY"], User: "someone-else"})
	if err != nil {
		t.Fatal(err)
	}
	othersKey := mint(other, "tag:k8s")

	b := headscaleBackend(t, env) // the operator that started next
	asked := 0
	inUse := func(context.Context) (func(string) bool, error) {
		asked++
		return func(secret string) bool { return secret == recorded.Key }, nil
	}
	expired, err := b.ExpireOrphanedKeys(ctx, time.Now().Add(time.Minute), inUse)
	if err != nil {
		t.Fatalf("ExpireOrphanedKeys: %v", err)
	}
	if len(expired) != 1 || expired[0].ID != orphan.ID || expired[0].Key != "" || !slices.Equal(expired[0].Tags, []string{"tag:k8s"}) {
		t.Fatalf("expired %+v, want only the orphan %s with its tags and no secret", expired, orphan.ID)
	}
	valid := func(b *tailnet.Headscale, id string) bool {
		t.Helper()
		keys, err := b.ListAuthKeys(ctx)
		if err != nil {
			t.Fatal(err)
		}
		i := slices.IndexFunc(keys, func(k tailnet.AuthKey) bool { return k.ID == id })
		if i < 0 {
			t.Fatalf("key %s not listed: %+v", id, keys)
		}
		return !keys[i].Invalid
	}
	if valid(b, orphan.ID) || !valid(b, recorded.ID) || !valid(b, untagged.ID) || !valid(other, othersKey.ID) {
		t.Fatalf("after the sweep: orphan valid %v (want false), recorded %v, untagged %v, another user's %v (want true)",
			valid(b, orphan.ID), valid(b, recorded.ID), valid(b, untagged.ID), valid(other, othersKey.ID))
	}

	young := mint(dead, "tag:k8s")
	asked = 0
	if expired, err = b.ExpireOrphanedKeys(ctx, time.Now().Add(-time.Minute), inUse); err != nil || len(expired) != 0 {
		t.Fatalf("a key younger than the grace period: expired %+v, err %v", expired, err)
	}
	if asked != 0 || !valid(b, young.ID) {
		t.Fatalf("the young key: in-use check asked %d times (want 0), valid %v", asked, valid(b, young.ID))
	}
}

// A real Headscale with a policy file (devcluster tailnet --policy) gives
// the backend its policy (GET /api/v1/policy reads the file in file mode):
// a tag its tagOwners declares is minted, one it does not declare is
// refused with the Tailscale API's words, although Headscale itself would
// apply it.
func TestHeadscaleRefusesTagsOutsideItsPolicy(t *testing.T) {
	policy := filepath.Join(t.TempDir(), "policy.hujson")
	if err := os.WriteFile(policy, []byte(`{"tagOwners": {"tag:k8s": []}, "acls": [{"action": "accept", "src": ["*"], "dst": ["*:*"]}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	env := headscaletest.Start(t, "--policy", policy)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b := headscaleBackend(t, env)
	if _, err := b.MintAuthKey(ctx, tailnet.KeyRequest{Tags: []string{"tag:k8s"}, Preauthorized: true}); err != nil {
		t.Fatalf("tag:k8s: %v", err)
	}
	_, err := b.MintAuthKey(ctx, tailnet.KeyRequest{Tags: []string{"tag:notowned"}, Preauthorized: true})
	var e *tailnet.Error
	if !errors.As(err, &e) || e.Status != http.StatusBadRequest || e.Message != tailnet.NotPermittedTags([]string{"tag:notowned"}) {
		t.Fatalf("tag:notowned: %v, want refused", err)
	}
	keys, err := b.ListAuthKeys(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		if slices.Contains(k.Tags, "tag:notowned") {
			t.Fatalf("Headscale holds a key with tag:notowned: %+v", k)
		}
	}
}
