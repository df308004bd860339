package main

import (
	"bytes"
	"strings"
	"testing"
)

// The hook's settings are checked before anything is contacted: a bad mode
// or release exits 1 with one line naming the variable.
func TestGatewayAPICRDsBadSettings(t *testing.T) {
	for env, want := range map[string]string{
		"maybe/tailscale/tailscale-operator": `tailplane-operator: TAILPLANE_GATEWAY_API_CRDS: "maybe" is not a mode: want auto or true`,
		"auto/tailscale-operator":            `tailplane-operator: TAILPLANE_RELEASE: "tailscale-operator" is not <namespace>/<name> of a Helm release`,
	} {
		mode, release, _ := strings.Cut(env, "/")
		getenv := func(k string) string {
			return map[string]string{envGatewayAPICRDs: mode, envRelease: release}[k]
		}
		var stdout, stderr bytes.Buffer
		if code := mainExit(nil, getenv, &stdout, &stderr); code != 1 || strings.TrimSpace(stderr.String()) != want {
			t.Errorf("%s: exit %d, stderr %q, want 1 and %q", env, code, stderr.String(), want)
		}
	}
}
