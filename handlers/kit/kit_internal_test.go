package kit

import (
	"testing"
)

func TestAppliedCacheSkipsOnlyIdenticalRecentApplies(t *testing.T) {
	var c appliedCache
	a, b := [32]byte{1}, [32]byte{2}
	c.remember("v1/secrets/tailscale/ts-web-1234-config", a)
	if !c.fresh("v1/secrets/tailscale/ts-web-1234-config", a) || c.fresh("v1/secrets/tailscale/ts-web-1234-config", b) {
		t.Fatal("cache does not tell identical from changed")
	}
	c.forgetProxy("tailscale", "ts-web-1234")
	if c.fresh("v1/secrets/tailscale/ts-web-1234-config", a) {
		t.Fatal("a deleted proxy's objects are still skipped")
	}
}
