package l7

import (
	"net/http"
	"testing"

	"github.com/tailplane/tailplane/proxy/route"
)

func TestStripTailscaleRemovesTheWholeFamily(t *testing.T) {
	h := http.Header{
		"Tailscale-User-Login":       {"a"},
		"Tailscale-Funnel-Request":   {"?1"},
		"Tailscale-App-Capabilities": {"{}"},
		"tailscale-headers-info":     {"x"}, // not canonical: a map set by hand
		"X-Tailscale-Like":           {"kept"},
		"Tailscalex":                 {"kept"},
	}
	stripTailscale(h)
	if len(h) != 2 || h.Get("X-Tailscale-Like") != "kept" || h.Get("Tailscalex") != "kept" {
		t.Errorf("after strip: %v, want only X-Tailscale-Like and Tailscalex", h)
	}
}

func TestSetOrigin(t *testing.T) {
	user := &route.Identity{LoginName: "ann@example.com", DisplayName: "Ánn Ōta", ProfilePicURL: "https://pic"}
	cases := []struct {
		name   string
		public bool
		id     *route.Identity
		want   http.Header
	}{
		{"public request: only the Funnel marker", true, user, http.Header{HeaderFunnelRequest: {"?1"}}},
		{"user-owned caller", false, user, http.Header{
			HeaderUserLogin: {"ann@example.com"}, HeaderUserName: {"=?utf-8?q?=C3=81nn_=C5=8Cta?="},
			HeaderUserProfilePic: {"https://pic"}, HeaderHeadersInfo: {"https://tailscale.com/s/serve-headers"},
		}},
		{"tagged caller: nothing", false, &route.Identity{LoginName: "tagged-devices", Tags: []string{"tag:ci"}}, http.Header{}},
		{"unknown caller: nothing", false, nil, http.Header{}},
		{"invalid UTF-8 name is dropped", false, &route.Identity{LoginName: "b@example.com", DisplayName: "\xff"}, http.Header{
			HeaderUserLogin: {"b@example.com"}, HeaderUserName: {""}, HeaderHeadersInfo: {"https://tailscale.com/s/serve-headers"},
		}},
	}
	for _, tc := range cases {
		h := http.Header{}
		setOrigin(h, tc.public, tc.id)
		if len(h) != len(tc.want) {
			t.Errorf("%s: got %v, want %v", tc.name, h, tc.want)
			continue
		}
		for k, v := range tc.want {
			if got := h.Values(k); len(got) != 1 || got[0] != v[0] {
				t.Errorf("%s: %s = %q, want %q", tc.name, k, got, v)
			}
		}
	}
}
