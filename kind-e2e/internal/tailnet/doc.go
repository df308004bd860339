// Package tailnet runs devcluster's tailnet on loopback: a control server
// (tailscale.com's testcontrol), a DERP relay and a STUN server, and, on the
// control server's base URL, a Tailscale-API-compatible endpoint (OAuth
// client-credentials tokens, auth keys, devices) that
// tailscale.com/client/tailscale/v2 works against unmodified. Auth keys
// minted through that API are the only keys the control server accepts.
//
// It may import tailscale.com, the acme package (for DNS-01 records) and
// charmbracelet/log.
package tailnet
