package device_test

import (
	"context"
	"slices"
	"testing"

	"github.com/tailplane/tailplane/handlers/lib/device"
	"github.com/tailplane/tailplane/internal/tailnet"
)

// Mint revokes the still-valid keys of the same description (minted and
// never recorded) before minting a preauthorized key with the tags; keys
// of other devices and spent keys are left alone.
func TestMintRevokesLeftoversOfTheSameDescription(t *testing.T) {
	be := &fakeTailnet{keys: []tailnet.AuthKey{
		{ID: "left", Description: "tailplane operator op"},
		{ID: "spent", Description: "tailplane operator op", Invalid: true},
		{ID: "other", Description: "tailplane ts-web-abcdef12-0"},
	}}
	k, err := device.Keys{Backend: be, Log: quiet(), Of: "the operator's device"}.Mint(context.Background(), "tailplane operator op", []string{"tag:k8s-operator"})
	if err != nil {
		t.Fatal(err)
	}
	if k.Key == "" || k.Description != "tailplane operator op" {
		t.Errorf("minted %+v", k)
	}
	if !slices.Equal(be.revoked, []string{"left"}) {
		t.Errorf("revoked %v, want [left]", be.revoked)
	}
	want := tailnet.KeyRequest{Tags: []string{"tag:k8s-operator"}, Preauthorized: true, Description: "tailplane operator op"}
	if len(be.minted) != 1 || !slices.Equal(be.minted[0].Tags, want.Tags) || !be.minted[0].Preauthorized ||
		be.minted[0].Reusable || be.minted[0].Ephemeral || be.minted[0].Description != want.Description {
		t.Errorf("minted %+v, want %+v", be.minted, want)
	}
}

// RevokeUnused revokes exactly the valid keys match accepts.
func TestRevokeUnusedFollowsMatch(t *testing.T) {
	be := &fakeTailnet{keys: []tailnet.AuthKey{
		{ID: "a", Description: "tailplane ts-web-abcdef12-0"},
		{ID: "b", Description: "tailplane ts-web-abcdef12-1"},
		{ID: "c", Description: "tailplane ts-db-12345678-0"},
	}}
	err := device.Keys{Backend: be, Log: quiet(), Of: "a proxy"}.RevokeUnused(context.Background(),
		func(d string) bool { return d != "tailplane ts-db-12345678-0" })
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(be.revoked, []string{"a", "b"}) {
		t.Errorf("revoked %v, want [a b]", be.revoked)
	}
}
