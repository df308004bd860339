package tailnet_test

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"testing"

	"github.com/tailplane/tailplane/internal/tailnet"
	"github.com/tailplane/tailplane/internal/tailnet/tailnettest"
)

// tagPolicy is a Headscale policy (HuJSON, comments and trailing commas
// included) whose tagOwners give tag:k8s to no one but the admin, tag:ops
// to a group with the operator's user, tag:own to that user, and tag:alice
// to someone else.
const tagPolicy = `{
	// the operator's keys belong to user tailplane
	"groups": {"group:ops": ["tailplane@", "bob@"],},
	"tagOwners": {
		"tag:k8s": [],
		"tag:ops": ["group:ops"],
		"tag:own": ["tailplane@"],
		"tag:alice": ["alice@"],
	},
}`

// The Headscale backend refuses, before minting and with the Tailscale
// API's own answer (HTTP 400, "requested tags [...] are invalid or not
// permitted"), tags Headscale's policy does not give the operator: a tag
// tagOwners does not declare, or one owned only by others. A tag declared
// without owners (the admin's, whose API key the operator holds), or owned
// by the keys' user directly or through a group, is minted. Without a
// policy file, or with one without tagOwners, nothing is checked; a policy
// Headscale cannot give is a temporary error and no key is minted.
func TestHeadscaleChecksTagOwners(t *testing.T) {
	api := tailnettest.NewHeadscaleAPI()
	defer api.Close()
	b, err := tailnet.NewHeadscale(tailnet.HeadscaleOptions{URL: api.URL, APIKey: "k"})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	mint := func(tags ...string) error {
		_, err := b.MintAuthKey(ctx, tailnet.KeyRequest{Tags: tags, Preauthorized: true})
		return err
	}

	if err := mint("tag:anything"); err != nil {
		t.Fatalf("no policy file: %v", err)
	}
	api.SetPolicy(`{"acls": [{"action": "accept", "src": ["*"], "dst": ["*:*"]}]}`)
	if err := mint("tag:anything"); err != nil {
		t.Fatalf("a policy without tagOwners: %v", err)
	}

	api.SetPolicy(tagPolicy)
	for _, tags := range [][]string{{"tag:k8s"}, {"tag:ops"}, {"tag:own", "tag:k8s"}} {
		if err := mint(tags...); err != nil {
			t.Errorf("%v: %v, want minted", tags, err)
		}
	}
	before := len(api.Minted())
	for _, tags := range [][]string{{"tag:notowned"}, {"tag:alice"}, {"tag:k8s", "tag:notowned"}} {
		err := mint(tags...)
		var e *tailnet.Error
		if !errors.As(err, &e) || e.Status != http.StatusBadRequest || e.Message != tailnet.NotPermittedTags(tags) {
			t.Errorf("%v: %v, want HTTP 400 %q", tags, err, tailnet.NotPermittedTags(tags))
			continue
		}
		if owner, ok := errors.AsType[*tailnet.TagOwnerError](err); !ok || owner.User != tailnet.DefaultHeadscaleUser {
			t.Errorf("%v: %v does not say which user owns tags", tags, err)
		}
		if tailnet.Temporary(err) {
			t.Errorf("%v: refused tags are retried as temporary", tags)
		}
	}
	if got := api.Minted(); len(got) != before {
		t.Fatalf("refused tags were minted: %v", got[before:])
	}
	if got := api.Minted(); !slices.Equal(got[len(got)-1], []string{"tag:own", "tag:k8s"}) {
		t.Fatalf("last key minted with %v", got[len(got)-1])
	}

	api.FailPolicy(http.StatusServiceUnavailable, "database is locked")
	if err := mint("tag:k8s"); !tailnet.Temporary(err) {
		t.Fatalf("an unreadable policy: %v, want a temporary error", err)
	}
	if got := api.Minted(); len(got) != before {
		t.Fatal("a key was minted without the policy")
	}
}
