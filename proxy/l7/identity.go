package l7

import (
	"mime"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/tailplane/tailplane/proxy/route"
)

// The headers the proxy sets for the backend, as tailscale serve does. The
// backend can trust every Tailscale-* header it receives: copies sent by
// clients, and any a router (plugin) asks to set, are removed first.
const (
	// HeaderUserLogin is the caller's login name (user-owned devices only).
	HeaderUserLogin = "Tailscale-User-Login"
	// HeaderUserName is the caller's display name.
	HeaderUserName = "Tailscale-User-Name"
	// HeaderUserProfilePic is the caller's profile picture URL.
	HeaderUserProfilePic = "Tailscale-User-Profile-Pic"
	// HeaderHeadersInfo points at the documentation of these headers; set
	// with the identity headers.
	HeaderHeadersInfo = "Tailscale-Headers-Info"
	// HeaderFunnelRequest is "?1" (a structured-field boolean) on requests
	// that came from the public internet (Funnel, or the public listen
	// address); such requests carry no identity headers.
	HeaderFunnelRequest = "Tailscale-Funnel-Request"
)

// headersInfoURL is the value tailscale serve gives HeaderHeadersInfo.
const headersInfoURL = "https://tailscale.com/s/serve-headers"

// tailscalePrefix starts every header name the proxy reserves. Removing the
// whole family (not a list) also covers the ones tailscale serve sets that
// Tailplane does not, such as Tailscale-App-Capabilities, so a backend
// written for tailscale serve is never fooled by a client.
const tailscalePrefix = "Tailscale-"

// stripTailscale removes every Tailscale-* header.
func stripTailscale(h http.Header) {
	for k := range h {
		if len(k) >= len(tailscalePrefix) && strings.EqualFold(k[:len(tailscalePrefix)], tailscalePrefix) {
			delete(h, k)
		}
	}
}

// setOrigin marks where a request came from: public requests get the Funnel
// marker; a user-owned tailnet caller gets the identity headers. Tagged
// devices have no user, so they get none (as with tailscale serve).
func setOrigin(h http.Header, public bool, id *route.Identity) {
	if public {
		h.Set(HeaderFunnelRequest, "?1")
		return
	}
	if id == nil || len(id.Tags) > 0 || id.LoginName == "" {
		return
	}
	h.Set(HeaderUserLogin, headerValue(id.LoginName))
	h.Set(HeaderUserName, headerValue(id.DisplayName))
	if id.ProfilePicURL != "" {
		h.Set(HeaderUserProfilePic, id.ProfilePicURL)
	}
	h.Set(HeaderHeadersInfo, headersInfoURL)
}

// headerValue makes a name safe in a header: RFC 2047 Q-encoding when it is
// not plain ASCII (a display name in any script), empty when it is not
// valid UTF-8. tailscale serve encodes the same way, so backends decode
// both alike.
func headerValue(v string) string {
	if !utf8.ValidString(v) {
		return ""
	}
	return mime.QEncoding.Encode("utf-8", v)
}
