// Package tailnet runs devcluster's tailnet on loopback: a control server
// (tailscale.com's testcontrol), a DERP relay and a STUN server, and, on the
// control server's base URL, a Tailscale-API-compatible endpoint (OAuth
// client-credentials tokens, auth keys, devices) that
// tailscale.com/client/tailscale/v2 works against unmodified. Auth keys
// minted through that API are the only keys the control server accepts.
// A tailnet policy file (HuJSON) decides, as on Tailscale, who reaches
// whom on which ports (acls and grants' ip, compiled into each node's
// packet filter), which tags the OAuth client may put on auth keys
// (tagOwners), which advertised routes and exit nodes are approved
// (autoApprovers; the others wait for an approval through the API), what
// node attributes devices get (nodeAttrs, such as funnel or the app
// connectors' tailscale.com/app-connectors), and which application
// capabilities a node's WhoIs lists for a peer (grants' app, such as
// tailscale.com/cap/kubernetes, carried in the destination's packet
// filter). Users other than the tailnet's owner join with UserAuthKey;
// Config.Groups is their directory's groups.
//
// Tailscale Services (VIP services) are real too: created through the API
// (/vip-services) with addresses from VIPRange, hosted by tagged nodes that
// advertise them (control asks each node what it serves over c2n when its
// Hostinfo's ServicesHash changes), approved by the policy's
// autoApprovers.services, and routed to one online host at a time, moving
// to another when that host goes away. Every node resolves a service's
// MagicDNS name, and its hosts may get its certificate.
//
// One control server may serve several tailnets (StartShared), as
// Tailscale serves many behind one URL: each has its own OAuth client,
// auth keys, devices, policy, users, services and MagicDNS domain; the auth
// key a node registers with decides its tailnet, its netmap shows only
// that tailnet's peers, and an API token addresses only its client's
// tailnet.
//
// It may import tailscale.com, github.com/tailscale/hujson (policy files),
// the acme package (for DNS-01 records; its tests also use pki) and
// charmbracelet/log.
package tailnet
