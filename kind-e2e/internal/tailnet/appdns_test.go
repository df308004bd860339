package tailnet

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"
	"tailscale.com/ipn"
	"tailscale.com/ipn/ipnstate"
)

// App connectors get their queries the way Tailscale routes them: control
// sends every other node a split-DNS route for each app domain to the
// connector's peer API (DNS over HTTP over the tailnet), so a client's
// MagicDNS resolver asks the connector, which answers with its host's
// resolver and, seeing the answer, learns the app's routes. (This machine's
// resolver answers nothing, so the answer here is the connector's
// NXDOMAIN; without the route the client's resolver has no one to ask.)
func TestAppConnectorGetsItsDomainsQueries(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const domain = "app.example.test"
	tn := startWithPolicy(t, `{
		"acls": [{"action": "accept", "src": ["*"], "dst": ["*:*"]}],
		"nodeAttrs": [{"target": ["tag:appc"], "app": {"tailscale.com/app-connectors": [
			{"name": "app", "connectors": ["tag:appc"], "domains": ["*.`+domain+`"]}]}}]}`)
	appc := join(ctx, t, tn, "appc", "tag:appc")
	client := join(ctx, t, tn, "client", "tag:k8s")
	clc, err := client.LocalClient()
	if err != nil {
		t.Fatal(err)
	}
	name := "www." + domain
	query := func() (dnsmessage.RCode, string) {
		res, resolvers, err := clc.QueryDNS(ctx, name, "A")
		if err != nil {
			t.Fatal(err)
		}
		var p dnsmessage.Parser
		h, err := p.Start(res)
		if err != nil {
			t.Fatalf("bad DNS answer: %v", err)
		}
		if len(resolvers) == 0 {
			return h.RCode, ""
		}
		return h.RCode, resolvers[0].Addr
	}
	// Not yet an app connector: nobody to ask.
	if _, via := query(); via != "" {
		t.Fatalf("%s resolved through %s before any app connector runs", name, via)
	}

	lc, err := appc.LocalClient()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lc.EditPrefs(ctx, &ipn.MaskedPrefs{Prefs: ipn.Prefs{AppConnector: ipn.AppConnectorPrefs{Advertise: true}}, AppConnectorSet: true}); err != nil {
		t.Fatal(err)
	}
	st := waitStatus(ctx, t, appc, "the connector's address", func(st *ipnstate.Status) bool { return st.Self != nil && len(st.TailscaleIPs) > 0 })
	prefix := fmt.Sprintf("http://%s:", st.TailscaleIPs[0])
	for {
		rcode, via := query()
		if strings.HasPrefix(via, prefix) && strings.HasSuffix(via, "/dns-query") && rcode != dnsmessage.RCodeServerFailure {
			break // the connector answered
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s not resolved through the connector's peer API %s...: last %v via %q", name, prefix, rcode, via)
		case <-time.After(200 * time.Millisecond):
		}
	}
}
