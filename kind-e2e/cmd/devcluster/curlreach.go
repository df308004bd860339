package main

import (
	"context"
	"fmt"
	"net/netip"
	"net/url"
	"strconv"
	"strings"

	"golang.org/x/net/dns/dnsmessage"
	"tailscale.com/client/local"

	"github.com/tailplane/tailplane/kind-e2e/internal/tailnet"
)

// checkPolicy asks devcluster's tailnet whether its policy lets this node
// reach the URL's host and port, and returns an error with the reason when
// it does not: the destination would drop the connection without a word,
// and the request would hang until --timeout. It says nothing (nil) when
// the answer is not known: Headscale, a name MagicDNS does not resolve,
// an address no device has.
func checkPolicy(ctx context.Context, lc *local.Client, env map[string]string, u *url.URL, tags []string) error {
	if env["TS_CONTROL"] == controlHeadscale || env["TS_API_URL"] == "" {
		return nil
	}
	st, err := lc.StatusWithoutPeers(ctx)
	if err != nil || st.Self == nil || len(st.Self.TailscaleIPs) == 0 {
		return nil
	}
	dst, ok := resolveTailnet(ctx, lc, u.Hostname())
	if !ok {
		return nil
	}
	src := st.Self.TailscaleIPs[0]
	if dst.Is6() {
		for _, a := range st.Self.TailscaleIPs {
			if a.Is6() {
				src = a
			}
		}
	}
	res, found, err := tailnet.AskReach(ctx, env["TS_API_URL"], env["TS_API_CLIENT_ID"], env["TS_API_CLIENT_SECRET"], src, dst, urlPort(u))
	if err != nil || !found || res.Allowed {
		return nil
	}
	who := "devcluster curl's node has no tag (it is the OAuth client's user)"
	if len(tags) > 0 {
		who = "devcluster curl's node has the tags " + strings.Join(tags, ",")
	}
	return fmt.Errorf("curl: the tailnet policy does not let this request through: %s; %s: give it a tag the policy lets in with --tag (repeatable; the OAuth client must own the tag in tagOwners)", res.Reason, who)
}

// resolveTailnet finds the tailnet address of host: host itself when it
// is an IP, else MagicDNS's answer (device and Tailscale Service names).
func resolveTailnet(ctx context.Context, lc *local.Client, host string) (netip.Addr, bool) {
	if a, err := netip.ParseAddr(host); err == nil {
		return a, true
	}
	raw, _, err := lc.QueryDNS(ctx, strings.TrimSuffix(host, ".")+".", "A")
	if err != nil {
		return netip.Addr{}, false
	}
	var p dnsmessage.Parser
	if _, err := p.Start(raw); err != nil {
		return netip.Addr{}, false
	}
	_ = p.SkipAllQuestions()
	for {
		h, err := p.AnswerHeader()
		if err != nil {
			return netip.Addr{}, false
		}
		if h.Type != dnsmessage.TypeA {
			_ = p.SkipAnswer()
			continue
		}
		a, err := p.AResource()
		if err != nil {
			return netip.Addr{}, false
		}
		return netip.AddrFrom4(a.A), true
	}
}

// urlPort is the URL's port, or its scheme's.
func urlPort(u *url.URL) uint16 {
	if p, err := strconv.ParseUint(u.Port(), 10, 16); err == nil {
		return uint16(p)
	}
	if u.Scheme == "http" {
		return 80
	}
	return 443
}
