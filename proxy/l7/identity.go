package l7

import (
	"net/http"

	"github.com/tailplane/tailplane/proxy/route"
)

// The identity headers the proxy sets from WhoIs. Copies sent by clients
// are always removed first, so a backend can trust them.
const (
	HeaderUserLogin      = "Tailscale-User-Login"
	HeaderUserName       = "Tailscale-User-Name"
	HeaderUserProfilePic = "Tailscale-User-Profile-Pic"
)

var identityHeaders = []string{HeaderUserLogin, HeaderUserName, HeaderUserProfilePic}

// stripIdentity removes every client-sent copy of the identity headers.
func stripIdentity(h http.Header) {
	for _, k := range identityHeaders {
		h.Del(k)
	}
}

// setIdentity adds the identity headers for a user-owned caller. Tagged
// devices have no user, so they get none (as with tailscale serve).
func setIdentity(h http.Header, id *route.Identity) {
	if id == nil || len(id.Tags) > 0 || id.LoginName == "" {
		return
	}
	h.Set(HeaderUserLogin, id.LoginName)
	h.Set(HeaderUserName, id.DisplayName)
	if id.ProfilePicURL != "" {
		h.Set(HeaderUserProfilePic, id.ProfilePicURL)
	}
}
