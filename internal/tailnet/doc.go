// Package tailnet is the operator's view of a control plane's admin API: the
// few calls the handlers need (mint, list and revoke auth keys for proxies,
// delete a proxy's device, list devices) behind the Backend interface, and its
// implementations: the Tailscale API (tailscale.com/client/tailscale/v2)
// with OAuth client credentials, and Headscale's REST API (/api/v1) with an
// API key, through a small HTTP client of its own. Features a control server
// lacks (Headscale: Tailscale Services, ts.net certificates) are reported by
// Supports, so that handlers refuse what needs them up front.
//
// Errors from the API carry the API's own message, so that handlers can put
// it verbatim into Events and conditions; Temporary tells which errors are
// worth retrying.
//
// It imports the Tailscale API client, golang.org/x/oauth2 and the standard
// library, nothing of Tailplane's.
package tailnet
